//! The op table: every tensor op of the JavaScript API, declared once, with its JS name, its
//! Rust name (which is also the `op` of the PyTorch fixture cases, tests/fixtures/ops.json), its
//! arguments and the Rust call it makes. Three consumers expand it: the JS binding
//! (`src/web/tensor.rs` makes one `Tensor` method per row), the native op suite (`tests/ops.rs`
//! runs each fixture case through its row) and the browser op suite (`tests/web.rs` calls the JS
//! method a row makes, by name, as JavaScript would). It sits at the tensor layer, compiled on
//! every target, because the native tests use it too.

/// Expands `$row! { … }` once per op of the table (callback style: each consumer brings its
/// own `$row` macro). A row is
///
/// ```text
/// #[doc = …]*  "jsName" rust_name ( receiver , required,* ; optional,* ) [-> "Tensor[]"] => call
/// static "jsName" rust_name ( required,* ; optional,* ) => call
/// ```
///
/// where the receiver is the identifier the call uses for `this`, a static row has none (it is
/// a static method of `Tensor`), `-> "Tensor[]"` marks an op returning several tensors, and
/// each argument is
///
/// ```text
/// name [@ "fixture key"] ["what"] : RustType as "TypeScript type"      (required)
/// name [@ "fixture key"] ["what"] : RustType as "TypeScript type" = default   (optional)
/// ```
///
/// `name` is the argument's name (in TypeScript too), `"what"` how error messages call it (the
/// name by default), the fixture key where a fixture case keeps it (the name by default; tensors
/// come from the case's inputs in order). An optional argument that is `undefined` (or `null`)
/// takes the default. `call` is an expression of the receiver and the arguments returning a
/// `Result` of a tensor (or of a `Vec` of them). Types are named unqualified: a consumer imports
/// `Axes, Conv2dOpts, CrossEntropyOpts, DType, Index, Operand, Reduction, Tensor` and the options
/// of the convolution block: `Conv1dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts, Interpolation,
/// PadMode, Pool2dOpts`.
///
/// Every row carries its documentation (`#[doc]`): the JS binding copies it into the method's
/// TypeScript declaration. The one-argument, two-operand and reduce ops are listed compactly as
/// `"jsName" rust_name " doc"` and expanded into rows by the arms at the end.
#[macro_export]
macro_rules! for_each_op {
    ($row:ident) => {
        $crate::for_each_op!(@unary $row
            "neg" neg " `-x` (logical not for bool).",
            "exp" exp " `e^x`.",
            "exp2" exp2 " `2^x`.",
            "log" log " The natural logarithm (NaN below 0, -Infinity at 0).",
            "log2" log2 " The base-2 logarithm.",
            "sqrt" sqrt " The square root (NaN below 0).",
            "rsqrt" rsqrt " `1 / sqrt(x)`.",
            "reciprocal" reciprocal " `1 / x`.",
            "sin" sin " The sine of radians.",
            "cos" cos " The cosine of radians.",
            "tan" tan " The tangent of radians.",
            "trunc" trunc " Rounded toward zero.",
            "floor" floor " Rounded down.",
            "ceil" ceil " Rounded up.",
            "round" round " Rounded to the nearest integer, halves to even.",
            "square" square " `x * x`.",
            "abs" abs " `|x|` (its derivative at 0 is 0).",
            "sign" sign " -1, 0 or 1 by the sign of each element.",
            "relu" relu " `max(x, 0)`.",
            "relu6" relu6 " `min(max(x, 0), 6)`.",
            "sigmoid" sigmoid " `1 / (1 + e^-x)`, computed stably.",
            "tanh" tanh " The hyperbolic tangent.",
            "gelu" gelu " GELU, tanh approximation.",
            "silu" silu " `x * sigmoid(x)`.",
            "swish" swish " `silu` under its other name.",
            "softplus" softplus " `log(1 + e^x)`, computed stably.",
            "mish" mish " `x * tanh(softplus(x))`.",
            "hardsigmoid" hardsigmoid " `clip(x / 6 + 1/2, 0, 1)`.",
            "hardswish" hardswish " `x * relu6(x + 3) / 6`.",
            "logicalNot" logical_not " Logical not of a \"bool\" tensor (an error for other dtypes).",
            "erf" erf " The error function.",
            "geluErf" gelu_erf " GELU, exact (through `erf`).",
            "quickGelu" quick_gelu " `x * sigmoid(1.702 x)` (CLIP's GELU).",
            "log10" log10 " The base-10 logarithm.",
            "asin" asin " The arc sine, in radians.",
            "acos" acos " The arc cosine, in radians.",
            "atan" atan " The arc tangent, in radians.",
            "sinh" sinh " The hyperbolic sine.",
            "cosh" cosh " The hyperbolic cosine.",
            "asinh" asinh " The inverse hyperbolic sine.",
            "acosh" acosh " The inverse hyperbolic cosine.",
            "atanh" atanh " The inverse hyperbolic tangent.",
            "selu" selu " SELU: `scale * (x > 0 ? x : alpha * (e^x - 1))` with PyTorch's constants.",
            "logsigmoid" logsigmoid " `log(sigmoid(x))`, computed stably.",
            "softsign" softsign " `x / (1 + |x|)`.",
            "isnan" isnan " Where the value is NaN, as \"bool\".",
            "isfinite" isfinite " Where the value is neither infinite nor NaN, as \"bool\".",
            "float" float " Cast to \"float32\".",
            "half" half " Cast to \"float16\".",
            "int" int " Cast to \"int32\" (floats truncate toward zero).",
            "bool" bool " Cast to \"bool\" (non-zero is true).",
            "diag" diag " A square matrix with this 1-D tensor on its diagonal.",
            "bitwiseNot" bitwise_not " Every bit flipped (integers; logical not for \"bool\").",
            "bfloat16" bfloat16 " Cast to \"bfloat16\"."
        );
        $crate::for_each_op!(@binary $row
            "add" add " `x + other`.",
            "sub" sub " `x - other`.",
            "mul" mul " `x * other`.",
            "div" div " `x / other`, true division (integers are promoted to \"float32\").",
            "idiv" idiv " Integer division truncating toward zero (an error for floats).",
            "mod" mod_ " The remainder with the sign of `other` (Python's `%`): `-7 mod 3` is 2.",
            "fmod" fmod " The remainder with the sign of `x` (C's `fmod`).",
            "pow" pow " `x ** other` (negative bases work for integer exponents).",
            "maximum" maximum " The larger of `x` and `other`.",
            "minimum" minimum " The smaller of `x` and `other`.",
            "lt" lt " `x < other`, as \"bool\".",
            "gt" gt " `x > other`, as \"bool\".",
            "le" le " `x <= other`, as \"bool\".",
            "ge" ge " `x >= other`, as \"bool\".",
            "eq" eq " `x == other`, as \"bool\".",
            "ne" ne " `x != other`, as \"bool\".",
            "bitwiseXor" bitwise_xor " Bitwise exclusive or (integers or \"bool\").",
            "bitwiseAnd" bitwise_and " Bitwise and (integers or \"bool\").",
            "bitwiseOr" bitwise_or " Bitwise or (integers or \"bool\").",
            "lshift" lshift " `x << other` (integers).",
            "rshift" rshift " `x >> other`, zero-filling (integers).",
            "copysign" copysign " `|x|` with the sign of `other`.",
            "logaddexp" logaddexp " `log(e^x + e^other)`, computed stably."
        );
        $crate::for_each_op!(@reduce $row
            "sum" sum " The sum over `axis` (a number or an array; all axes when omitted); \"bool\" and \"uint8\" sum as \"int32\".",
            "mean" mean " The mean over `axis` (a number or an array; all axes when omitted).",
            "max" max " The largest element over `axis` (a number or an array; all axes when omitted).",
            "min" min " The smallest element over `axis` (a number or an array; all axes when omitted).",
            "logsumexp" logsumexp " `log(sum(e^x))` over `axis` (all axes when omitted), computed stably.",
            "prod" prod " The product over `axis` (a number or an array; all axes when omitted).",
            "any" any " Whether any element over `axis` is non-zero, as \"bool\" (all axes when omitted).",
            "all" all " Whether every element over `axis` is non-zero, as \"bool\" (all axes when omitted)."
        );

        // Elementwise ops with arguments.
        $row! {
            #[doc = " The same values, cut off from autograd."]
            "detach" detach(x) => Ok(x.detach())
        }
        $row! {
            #[doc = " The values in a buffer of their own, in row-major order."]
            "contiguous" contiguous(x) => Ok(x.contiguous())
        }
        $row! {
            #[doc = " Zeros with this tensor's shape and dtype."]
            "zerosLike" zeros_like(x) => Ok(x.zeros_like())
        }
        $row! {
            #[doc = " Ones with this tensor's shape and dtype."]
            "onesLike" ones_like(x) => Ok(x.ones_like())
        }
        $row! {
            #[doc = " `value` with this tensor's shape and dtype."]
            "fullLike" full_like(x, value: f64 as "number") => Ok(x.full_like(value))
        }
        $row! {
            #[doc = " The values converted to `dtype` (floats to integers truncate toward zero and saturate)."]
            "cast" cast(x, dtype: DType as "DType") => x.cast(dtype)
        }
        $row! {
            #[doc = " `cond.where(a, b)`: `a` where the condition holds, else `b`."]
            "where" where_(x, a: Operand as "Tensor | number", b: Operand as "Tensor | number")
                => x.where_(a, b)
        }
        $row! {
            #[doc = " Logical and of two \"bool\" tensors."]
            "logicalAnd" logical_and(x, other "the other operand": Tensor as "Tensor")
                => x.logical_and(&other)
        }
        $row! {
            #[doc = " Logical or of two \"bool\" tensors."]
            "logicalOr" logical_or(x, other "the other operand": Tensor as "Tensor")
                => x.logical_or(&other)
        }
        $row! {
            #[doc = " `x` where positive, else `slope * x` (default 0.01)."]
            "leakyRelu" leaky_relu(x; slope: f64 as "number" = 0.01) => x.leaky_relu(slope)
        }
        $row! {
            #[doc = " `x` where positive, else `alpha * (e^x - 1)` (default alpha 1)."]
            "elu" elu(x; alpha: f64 as "number" = 1.0) => x.elu(alpha)
        }
        $row! {
            #[doc = " `clip(x, min, max)` (default -1 and 1)."]
            "hardtanh" hardtanh(x; min: f64 as "number" = -1.0, max: f64 as "number" = 1.0)
                => x.hardtanh(min, max)
        }
        $row! {
            #[doc = " Values below `min` become `min`, above `max` become `max`."]
            "clip" clip(x, min: f64 as "number", max: f64 as "number") => x.clip(min, max)
        }
        $row! {
            #[doc = " Zero elements with probability `p` (default 0.5) and scale the rest, in training mode."]
            "dropout" dropout(x; p: f64 as "number" = 0.5) => x.dropout(p)
        }

        // Reductions with more arguments.
        $row! {
            #[doc = " Index of the largest value along `axis` (of the flattened tensor when omitted)."]
            "argmax" argmax(x; axis: Option<isize> as "number | null" = None,
                keepdim: bool as "boolean" = false) => x.argmax(axis, keepdim)
        }
        $row! {
            #[doc = " Index of the smallest value along `axis` (of the flattened tensor when omitted)."]
            "argmin" argmin(x; axis: Option<isize> as "number | null" = None,
                keepdim: bool as "boolean" = false) => x.argmin(axis, keepdim)
        }
        $row! {
            #[doc = " Variance with `correction` (1: unbiased, the default)."]
            "var" var(x; axis @ "axes": Axes as "number | number[] | null" = Axes::All,
                keepdim: bool as "boolean" = false, correction: f64 as "number" = 1.0)
                => x.var(axis, keepdim, correction)
        }
        $row! {
            #[doc = " Standard deviation with `correction` (1: unbiased, the default)."]
            "std" std(x; axis @ "axes": Axes as "number | number[] | null" = Axes::All,
                keepdim: bool as "boolean" = false, correction: f64 as "number" = 1.0)
                => x.std(axis, keepdim, correction)
        }
        $row! {
            #[doc = " Softmax along `axis` (default -1)."]
            "softmax" softmax(x; axis: isize as "number" = -1) => x.softmax(axis)
        }
        $row! {
            #[doc = " `log(softmax(x))` along `axis` (default -1), computed stably."]
            "logSoftmax" log_softmax(x; axis: isize as "number" = -1) => x.log_softmax(axis)
        }

        // Movement.
        $row! {
            #[doc = " New shape (one entry may be -1)."]
            "reshape" reshape(x, shape: Vec<isize> as "number[]") => x.reshape(&shape)
        }
        $row! {
            #[doc = " Axes reordered: axis `i` of the result is axis `order[i]` (a view, no copy)."]
            "permute" permute(x, order: Vec<isize> as "number[]") => x.permute(&order)
        }
        $row! {
            #[doc = " Swap axes `a` and `b` (default 1 and 0, as in tinygrad)."]
            "transpose" transpose(x; a: isize as "number" = 1, b: isize as "number" = 0)
                => x.transpose(a, b)
        }
        $row! {
            #[doc = " Size-1 axes broadcast to `shape` (-1 keeps an axis; new axes go in front)."]
            "expand" expand(x, shape: Vec<isize> as "number[]") => x.expand(&shape)
        }
        $row! {
            #[doc = " Axes `startDim..=endDim` (default: all) flattened into one."]
            "flatten" flatten(x; start_dim "startDim": isize as "number" = 0,
                end_dim "endDim": isize as "number" = -1) => x.flatten_range(start_dim, end_dim)
        }
        $row! {
            #[doc = " Size-1 axis `axis` removed (every size-1 axis when omitted)."]
            "squeeze" squeeze(x; axis: Option<isize> as "number | null" = None) => x.squeeze(axis)
        }
        $row! {
            #[doc = " A size-1 axis inserted at `axis`."]
            "unsqueeze" unsqueeze(x, axis: isize as "number") => x.unsqueeze(axis)
        }
        $row! {
            #[doc = " `pads`: one `[before, after]` pair per axis (a negative one crops); `mode`: the"]
            #[doc = " fill value, or \"constant\" (with `value`, default 0), \"reflect\", \"replicate\","]
            #[doc = " \"circular\" (tinygrad's `pad(padding, mode, value)`)."]
            "pad" pad(x, pads: Vec<(isize, isize)> as "[number, number][]";
                mode: PadMode as "number | PadMode" = PadMode::Constant(0.0),
                value: Option<f64> as "number" = None)
                => x.pad_with(&pads, match (mode, value) {
                    (PadMode::Constant(_), Some(v)) => PadMode::Constant(v),
                    (m, _) => m,
                })
        }
        $row! {
            #[doc = " `arg`: one `[start, end]` pair per axis."]
            "shrink" shrink(x, arg @ "ranges": Vec<(usize, usize)> as "[number, number][]")
                => x.shrink(&arg)
        }
        $row! {
            #[doc = " Elements `start..end` (negative counts from the end) every `step` along `axis`."]
            "slice" slice(x, axis: isize as "number"; start: isize as "number" = 0,
                end: isize as "number" = isize::MAX, step: usize as "number" = 1)
                => x.slice(axis, start, end, step)
        }
        $row! {
            #[doc = " Elements in reverse order along `axes`."]
            "flip" flip(x, axes: Vec<isize> as "number | number[]") => x.flip(&axes)
        }
        $row! {
            #[doc = " The tensor tiled `repeats[i]` times along axis `i`."]
            "repeat" repeat(x, reps @ "repeats" "shape": Vec<usize> as "number[]")
                => x.repeat(&reps)
        }
        $row! {
            #[doc = " Rows selected by an integer tensor (`x[idx]`)."]
            "index" index(x, idx "the index": Tensor as "Tensor") => x.index(&idx)
        }
        $row! {
            #[doc = " `out[..., i, ...] = x[..., index[..., i, ...], ...]` along `axis`."]
            "gather" gather(x, axis: isize as "number", index "the index": Tensor as "Tensor")
                => x.gather(axis, &index)
        }
        $row! {
            #[doc = " Split into pieces of the given sizes along `axis`."]
            "split" split(x, sizes "shape": Vec<usize> as "number[]"; axis: isize as "number" = 0)
                -> "Tensor[]" => x.split(&sizes, axis)
        }
        $row! {
            #[doc = " Split into `n` pieces of (nearly) equal size along `axis`."]
            "chunk" chunk(x, n: usize as "number"; axis: isize as "number" = 0)
                -> "Tensor[]" => x.chunk(n, axis)
        }
        $row! {
            #[doc = " Tensors joined along `axis` (shapes equal elsewhere)."]
            static "cat" cat(tensors: Vec<Tensor> as "Tensor[]"; axis: isize as "number" = 0)
                => Tensor::cat(&tensors.iter().collect::<Vec<_>>(), axis)
        }
        $row! {
            #[doc = " Tensors of one shape joined along a new axis `axis`."]
            static "stack" stack(tensors: Vec<Tensor> as "Tensor[]"; axis: isize as "number" = 0)
                => Tensor::stack(&tensors.iter().collect::<Vec<_>>(), axis)
        }
        $row! {
            #[doc = " Write `value` into this tensor's buffer (in place, like an optimizer update)."]
            "assign" assign(x, value "the value": Tensor as "Tensor") => x.assign(&value)
        }

        // Neural-network functions and losses.
        $row! {
            #[doc = " The matrix product, numpy's rules (1-D operands, broadcast batch axes)."]
            "matmul" matmul(x, other "the other operand": Tensor as "Tensor") => x.matmul(&other)
        }
        $row! {
            #[doc = " `matmul` under numpy's other name."]
            "dot" dot(x, other "the other operand": Tensor as "Tensor") => x.dot(&other)
        }
        $row! {
            #[doc = " `x @ weight + bias` (weight is `[in, out]`, as tinygrad's `linear`; nn.Linear stores `[out, in]`)."]
            "linear" linear(x, weight "the weight": Tensor as "Tensor";
                bias "the bias": Option<Tensor> as "Tensor | null" = None)
                => x.linear(&weight, bias.as_ref())
        }
        $row! {
            #[doc = " 2-D convolution of `[N, C, H, W]` by `weight` `[out, C/groups, kh, kw]`;"]
            #[doc = " opts: `{ stride, padding: number | [ph, pw] | \"valid\" | \"same\", dilation, groups }`."]
            "conv2d" conv2d(x, weight "the weight": Tensor as "Tensor";
                bias "the bias": Option<Tensor> as "Tensor | null" = None,
                opts: Conv2dOpts as "Conv2dOptions" = Conv2dOpts::default())
                => x.conv2d(&weight, bias.as_ref(), &opts)
        }
        $row! {
            #[doc = " Max over `kernel` windows every `stride` (default: the kernel) of the last two axes;"]
            #[doc = " opts: `{ padding, dilation, ceilMode }`."]
            "maxPool2d" max_pool2d(x;
                kernel: (usize, usize) as "number | [number, number]" = (2, 2),
                stride: Option<(usize, usize)> as "number | [number, number] | null" = None,
                opts: Pool2dOpts as "Pool2dOptions" = Pool2dOpts::default())
                => x.max_pool2d_with(kernel, &Pool2dOpts { stride, ..opts })
        }
        $row! {
            #[doc = " Mean over `kernel` windows every `stride` (default: the kernel) of the last two axes;"]
            #[doc = " opts: `{ padding, dilation, ceilMode, countIncludePad }`."]
            "avgPool2d" avg_pool2d(x;
                kernel: (usize, usize) as "number | [number, number]" = (2, 2),
                stride: Option<(usize, usize)> as "number | [number, number] | null" = None,
                opts: Pool2dOpts as "Pool2dOptions" = Pool2dOpts::default())
                => x.avg_pool2d_with(kernel, &Pool2dOpts { stride, ..opts })
        }
        $row! {
            #[doc = " Cross-entropy of logits (classes last) against integer labels;"]
            #[doc = " opts: `{ ignoreIndex, labelSmoothing, reduction: \"mean\" | \"sum\" | \"none\" }`."]
            "sparseCategoricalCrossentropy" sparse_categorical_crossentropy(x,
                labels "the labels": Tensor as "Tensor";
                opts: CrossEntropyOpts as "CrossEntropyOptions" = CrossEntropyOpts::default())
                => x.sparse_categorical_crossentropy(&labels, &opts)
        }
        $row! {
            #[doc = " Binary cross-entropy of probabilities against targets in [0, 1]."]
            "binaryCrossentropy" binary_crossentropy(x, y "the target": Tensor as "Tensor";
                reduction: Reduction as "Reduction" = Reduction::Mean)
                => x.binary_crossentropy(&y, reduction)
        }
        $row! {
            #[doc = " Binary cross-entropy of logits against targets in [0, 1], computed stably."]
            "binaryCrossentropyLogits" binary_crossentropy_logits(x,
                y "the target": Tensor as "Tensor";
                reduction: Reduction as "Reduction" = Reduction::Mean)
                => x.binary_crossentropy_logits(&y, reduction)
        }
        $row! {
            #[doc = " Mean squared error against `y` (`reduction` \"mean\", \"sum\" or \"none\")."]
            "mse" mse(x, y "the target": Tensor as "Tensor";
                reduction: Reduction as "Reduction" = Reduction::Mean) => x.mse(&y, reduction)
        }

        $row! {
            #[doc = " A constant with this tensor's shape and dtype (`fullLike`)."]
            "constLike" const_like(x, value: f64 as "number") => Ok(x.const_like(value))
        }
        $row! {
            #[doc = " `(x - mean) / sqrt(var + eps)` over `axis` (default the last), no parameters."]
            "layernorm" layernorm(x; axis @ "axes": Axes as "number | number[] | null" = Axes::Some(vec![-1]),
                eps: f64 as "number" = 1e-5) => x.layernorm(axis, eps)
        }
        $row! {
            #[doc = " `(x - mean) * weight * invstd + bias` with per-channel tensors on `axis` (default 1)."]
            "batchnorm" batchnorm(x, weight "the weight": Option<Tensor> as "Tensor | null",
                bias "the bias": Option<Tensor> as "Tensor | null",
                mean "the mean": Tensor as "Tensor", invstd "invstd": Tensor as "Tensor";
                axis: isize as "number" = 1)
                => x.batchnorm(weight.as_ref(), bias.as_ref(), &mean, &invstd, axis)
        }
        $row! {
            #[doc = " Newton-Schulz iteration of an odd matrix polynomial with coefficients `params`."]
            "newtonSchulz" newton_schulz(x, steps: usize as "number", params: Vec<f64> as "number[]";
                eps: f64 as "number" = 1e-7) => x.newton_schulz(steps, &params, eps)
        }

        // Math and predicates with arguments.
        $row! {
            #[doc = " `max(x, 0) + min(0, alpha * (e^(x / alpha) - 1))` (default alpha 1)."]
            "celu" celu(x; alpha: f64 as "number" = 1.0) => x.celu(alpha)
        }
        $row! {
            #[doc = " Where the value is +inf (`detectPositive`) or -inf (`detectNegative`)."]
            "isinf" isinf(x; detect_positive "detectPositive": bool as "boolean" = true,
                detect_negative "detectNegative": bool as "boolean" = true)
                => x.isinf(detect_positive, detect_negative)
        }
        $row! {
            #[doc = " `|x - other| <= atol + rtol * |other|` (numpy's `isclose`)."]
            "isclose" isclose(x, other @ "scalar" "the other operand": Operand as "Tensor | number";
                rtol: f64 as "number" = 1e-5, atol: f64 as "number" = 1e-8,
                equal_nan "equalNan": bool as "boolean" = false)
                => x.isclose(other, rtol, atol, equal_nan)
        }
        $row! {
            #[doc = " Whether every element `isclose`, as a bool scalar."]
            "allclose" allclose(x, other @ "scalar" "the other operand": Operand as "Tensor | number";
                rtol: f64 as "number" = 1e-5, atol: f64 as "number" = 1e-8,
                equal_nan "equalNan": bool as "boolean" = false)
                => x.allclose(other, rtol, atol, equal_nan)
        }
        $row! {
            #[doc = " `x + (end - x) * weight`."]
            "lerp" lerp(x, end "the end": Tensor as "Tensor",
                weight @ "scalar" "the weight": Operand as "Tensor | number")
                => x.lerp(&end, weight)
        }
        $row! {
            #[doc = " `clip` with either bound optional."]
            "clamp" clamp(x; min: Option<f64> as "number | null" = None,
                max: Option<f64> as "number | null" = None) => x.clamp(min, max)
        }

        // Reductions and scans with arguments.
        $row! {
            #[doc = " `[variance, mean]`."]
            "varMean" var_mean(x; axis @ "axes": Axes as "number | number[] | null" = Axes::All,
                keepdim: bool as "boolean" = false, correction: f64 as "number" = 1.0)
                -> "Tensor[]" => x.var_mean(axis, keepdim, correction).map(|(v, m)| vec![v, m])
        }
        $row! {
            #[doc = " `[standard deviation, mean]`."]
            "stdMean" std_mean(x; axis @ "axes": Axes as "number | number[] | null" = Axes::All,
                keepdim: bool as "boolean" = false, correction: f64 as "number" = 1.0)
                -> "Tensor[]" => x.std_mean(axis, keepdim, correction).map(|(v, m)| vec![v, m])
        }
        $row! {
            #[doc = " `x / max(||x||_p, eps)` along `axis` (default p 2, axis 1)."]
            "normalize" normalize(x; p: f64 as "number" = 2.0, axis: isize as "number" = 1,
                eps: f64 as "number" = 1e-12) => x.normalize(p, axis, eps)
        }
        $row! {
            #[doc = " `softmax(-x)` along `axis` (default -1)."]
            "softmin" softmin(x; axis: isize as "number" = -1) => x.softmin(axis)
        }
        $row! {
            #[doc = " Running sums along `axis` (default 0)."]
            "cumsum" cumsum(x; axis: isize as "number" = 0) => x.cumsum(axis)
        }
        $row! {
            #[doc = " Running products along `axis`."]
            "cumprod" cumprod(x, axis: isize as "number") => x.cumprod(axis)
        }
        $row! {
            #[doc = " `[running max, int32 index where it was reached]` along `axis`."]
            "cummax" cummax(x; axis: isize as "number" = 0)
                -> "Tensor[]" => x.cummax(axis).map(|(v, i)| vec![v, i])
        }
        $row! {
            #[doc = " `[running min, int32 index where it was reached]` along `axis`."]
            "cummin" cummin(x; axis: isize as "number" = 0)
                -> "Tensor[]" => x.cummin(axis).map(|(v, i)| vec![v, i])
        }
        $row! {
            #[doc = " Running `log(sum(e^x))` along `axis` (default 0), computed stably."]
            "logcumsumexp" logcumsumexp(x; axis: isize as "number" = 0) => x.logcumsumexp(axis)
        }

        // Sorting and sampling.
        $row! {
            #[doc = " `[sorted values, int32 indices]` along `axis` (stable; NaN is the largest)."]
            "sort" sort(x; axis: isize as "number" = -1, descending: bool as "boolean" = false)
                -> "Tensor[]" => x.sort(axis, descending).map(|(v, i)| vec![v, i])
        }
        $row! {
            #[doc = " The int32 indices that sort along `axis` (stable; `descending` reverses)."]
            "argsort" argsort(x; axis: isize as "number" = -1,
                descending: bool as "boolean" = false) => x.argsort(axis, descending)
        }
        $row! {
            #[doc = " `[values, int32 indices]` of the `k` largest (or smallest) along `axis`."]
            "topk" topk(x, k: usize as "number"; axis: isize as "number" = -1,
                largest: bool as "boolean" = true)
                -> "Tensor[]" => x.topk(k, axis, largest).map(|(v, i)| vec![v, i])
        }
        $row! {
            #[doc = " Category indices drawn in proportion to the weights (rows of a 1-D or 2-D tensor)."]
            "multinomial" multinomial(x; num_samples "numSamples": usize as "number" = 1,
                replacement: bool as "boolean" = false) => x.multinomial(num_samples, replacement)
        }
        $row! {
            #[doc = " A random permutation of `0..n` (int32)."]
            static "randperm" randperm(n: usize as "number") => Tensor::randperm(n)
        }

        // Masks and indexing.
        $row! {
            #[doc = " Elements above diagonal `diagonal` (0: the main one) set to zero."]
            "tril" tril(x; diagonal: isize as "number" = 0) => x.tril(diagonal)
        }
        $row! {
            #[doc = " Elements below diagonal `diagonal` (0: the main one) set to zero."]
            "triu" triu(x; diagonal: isize as "number" = 0) => x.triu(diagonal)
        }
        $row! {
            #[doc = " One-hot int32 vectors (a new last axis) of integer classes."]
            "oneHot" one_hot(x, num_classes "numClasses": usize as "number") => x.one_hot(num_classes)
        }
        $row! {
            #[doc = " `value` where `mask` holds, else `x`."]
            "maskedFill" masked_fill(x, mask "the mask": Tensor as "Tensor",
                value @ "scalar" "the value": Operand as "Tensor | number")
                => x.masked_fill(&mask, value)
        }
        $row! {
            #[doc = " `x[index]` as in Python: one index, or an array of them, each a number, a"]
            #[doc = " slice string (`\":\"`, `\"1:-1\"`, `\"::-1\"`) or `{start, stop, step}`, `null`"]
            #[doc = " (a new axis), `\"...\"`, an integer Tensor or an array of integers."]
            "get" get(x, index: Vec<Index> as "Index | Index[]") => x.get(&index)
        }
        $row! {
            #[doc = " `x[index] = value` in place (an assign, as the optimizers' updates); returns `x`."]
            "set" set(x, index: Vec<Index> as "Index | Index[]",
                value @ "scalar" "the value": Operand as "Tensor | number") => x.set(&index, value)
        }
        $row! {
            #[doc = " `out[.., index[i, j], ..] = src[i, j]` along `axis` (the last write wins);"]
            #[doc = " `reduce` \"add\" or \"multiply\" combines instead."]
            "scatter" scatter(x, axis: isize as "number", index "the index": Tensor as "Tensor",
                src @ "scalar" "the source": Operand as "Tensor | number";
                reduce: Option<String> as "\"add\" | \"multiply\" | null" = None)
                => x.scatter(axis, &index, src, reduce.as_deref())
        }
        $row! {
            #[doc = " `src` reduced into `x` along `axis` at `index`: \"sum\", \"prod\", \"mean\", \"amax\" or \"amin\"."]
            "scatterReduce" scatter_reduce(x, axis: isize as "number",
                index "the index": Tensor as "Tensor", src "the source": Tensor as "Tensor",
                reduce: String as "\"sum\" | \"prod\" | \"mean\" | \"amax\" | \"amin\"";
                include_self "includeSelf": bool as "boolean" = true)
                => x.scatter_reduce(axis, &index, &src, &reduce, include_self)
        }

        // Movement.
        $row! {
            #[doc = " Roll by `shifts` along `axes` (the flattened tensor with no axes)."]
            "roll" roll(x, shifts: Vec<isize> as "number | number[]";
                axes: Vec<isize> as "number | number[]" = vec![]) => x.roll(&shifts, &axes)
        }
        $row! {
            #[doc = " Each element repeated `repeats` times along `axis` (of the flattened tensor when omitted)."]
            "repeatInterleave" repeat_interleave(x, repeats: usize as "number";
                axis: Option<isize> as "number | null" = None) => x.repeat_interleave(repeats, axis)
        }
        $row! {
            #[doc = " Axis `axis` split into `sizes` (one may be -1)."]
            "unflatten" unflatten(x, axis: isize as "number", sizes @ "shape": Vec<isize> as "number[]")
                => x.unflatten(axis, &sizes)
        }
        $row! {
            #[doc = " The diagonal of axes `dim1` and `dim2`, `offset` above the main one."]
            "diagonal" diagonal(x; offset: isize as "number" = 0, dim1: isize as "number" = 0,
                dim2: isize as "number" = 1) => x.diagonal(offset, dim1, dim2)
        }
        $row! {
            #[doc = " `reshape` under PyTorch's other name."]
            "view" view(x, shape: Vec<isize> as "number[]") => x.view(&shape)
        }
        $row! {
            #[doc = " Zero-pad at the end of each axis up to `shape` (-1 keeps an axis)."]
            "padTo" pad_to(x, shape: Vec<isize> as "number[]") => x.pad_to(&shape)
        }
        $row! {
            #[doc = " Coordinate grids of this and `others` (1-D), `\"ij\"` or `\"xy\"` indexing."]
            "meshgrid" meshgrid(x, others: Vec<Tensor> as "Tensor[]";
                indexing: String as "\"ij\" | \"xy\"" = "ij".to_string())
                -> "Tensor[]" => Tensor::meshgrid(
                    &std::iter::once(&x).chain(others.iter()).collect::<Vec<_>>(), &indexing)
        }
        $row! {
            #[doc = " Einstein summation, e.g. `einsum(\"ij,jk->ik\", [a, b])`."]
            static "einsum" einsum(formula: String as "string", operands: Vec<Tensor> as "Tensor[]")
                => Tensor::einsum(&formula, &operands.iter().collect::<Vec<_>>())
        }
        $row! {
            #[doc = " `steps` evenly spaced values from `start` to `stop` inclusive."]
            static "linspace" linspace(start: f64 as "number", stop: f64 as "number",
                steps: usize as "number"; dtype: DType as "DType" = DType::F32)
                => Tensor::linspace(start, stop, steps, dtype)
        }

        // Losses and attention.
        $row! {
            #[doc = " Cross-entropy of logits (classes on axis 1) against class indices or probabilities."]
            "crossEntropy" cross_entropy(x, target "the target": Tensor as "Tensor";
                reduction: Reduction as "Reduction" = Reduction::Mean,
                label_smoothing "labelSmoothing": f64 as "number" = 0.0)
                => x.cross_entropy(&target, reduction, label_smoothing)
        }
        $row! {
            #[doc = " Negative log-likelihood of log-probabilities (classes on axis 1) at integer targets."]
            "nllLoss" nll_loss(x, target "the target": Tensor as "Tensor";
                weight "the weight": Option<Tensor> as "Tensor | null" = None,
                ignore_index "ignoreIndex": Option<i64> as "number | null" = None,
                reduction: Reduction as "Reduction" = Reduction::Mean)
                => x.nll_loss(&target, weight.as_ref(), ignore_index, reduction)
        }
        $row! {
            #[doc = " `softmax(q k^T / sqrt(d) + mask) v` (this tensor is q)."]
            "scaledDotProductAttention" scaled_dot_product_attention(x,
                key "the key": Tensor as "Tensor", value "the value": Tensor as "Tensor";
                attn_mask "attnMask": Option<Tensor> as "Tensor | null" = None,
                dropout_p "dropoutP": f64 as "number" = 0.0,
                is_causal "isCausal": bool as "boolean" = false,
                enable_gqa "enableGqa": bool as "boolean" = false)
                => x.scaled_dot_product_attention(&key, &value, attn_mask.as_ref(), dropout_p,
                    is_causal, enable_gqa)
        }

        // ---- Convolutions, pooling and resampling (h-conv; `pad`, `maxPool2d` and
        // `avgPool2d` above take their options too). Code in src/tensor/conv.rs.
        $row! {
            #[doc = " 1-D convolution of `[N, C, L]` by `weight` `[out, C/groups, k]`;"]
            #[doc = " opts: `{ stride, padding: number | \"valid\" | \"same\", dilation, groups }`."]
            "conv1d" conv1d(x, weight "the weight": Tensor as "Tensor";
                bias "the bias": Option<Tensor> as "Tensor | null" = None,
                opts: Conv1dOpts as "Conv1dOptions" = Conv1dOpts::default())
                => x.conv1d(&weight, bias.as_ref(), &opts)
        }
        $row! {
            #[doc = " Transposed 2-D convolution of `[N, C_in, H, W]` by `weight` `[C_in, out/groups, kh, kw]`;"]
            #[doc = " opts: `{ stride, padding, outputPadding, dilation, groups }`."]
            "convTranspose2d" conv_transpose2d(x, weight "the weight": Tensor as "Tensor";
                bias "the bias": Option<Tensor> as "Tensor | null" = None,
                opts: ConvTranspose2dOpts as "ConvTranspose2dOptions" = ConvTranspose2dOpts::default())
                => x.conv_transpose2d(&weight, bias.as_ref(), &opts)
        }
        $row! {
            #[doc = " Transposed 1-D convolution of `[N, C_in, L]` by `weight` `[C_in, out/groups, k]`;"]
            #[doc = " opts: `{ stride, padding, outputPadding, dilation, groups }` (numbers)."]
            "convTranspose1d" conv_transpose1d(x, weight "the weight": Tensor as "Tensor";
                bias "the bias": Option<Tensor> as "Tensor | null" = None,
                opts: ConvTranspose1dOpts as "ConvTranspose1dOptions" = ConvTranspose1dOpts::default())
                => x.conv_transpose1d(&weight, bias.as_ref(), &opts)
        }
        $row! {
            #[doc = " `[values, indices]` of `maxPool2d`: each maximum's flat position `row * W + col`"]
            #[doc = " in the last two axes (int32), as `maxUnpool2d` takes."]
            "maxPool2dWithIndices" max_pool2d_with_indices(x;
                kernel: (usize, usize) as "number | [number, number]" = (2, 2),
                stride: Option<(usize, usize)> as "number | [number, number] | null" = None,
                opts: Pool2dOpts as "Pool2dOptions" = Pool2dOpts::default())
                -> "Tensor[]" => x
                    .max_pool2d_with_indices(kernel, &Pool2dOpts { stride, ..opts })
                    .map(|(v, i)| vec![v, i])
        }
        $row! {
            #[doc = " Each value put back where `indices` (from `maxPool2dWithIndices`) says, zeros"]
            #[doc = " elsewhere; the output size follows from the pooling's, or is `outputSize`."]
            "maxUnpool2d" max_unpool2d(x, indices "the indices": Tensor as "Tensor";
                kernel: (usize, usize) as "number | [number, number]" = (2, 2),
                stride: Option<(usize, usize)> as "number | [number, number] | null" = None,
                opts: Pool2dOpts as "Pool2dOptions" = Pool2dOpts::default(),
                output_size "outputSize": Option<(usize, usize)>
                    as "number | [number, number] | null" = None)
                => x.max_unpool2d(&indices, kernel, &Pool2dOpts { stride, ..opts }, output_size)
        }
        $row! {
            #[doc = " Resize the last `size.length` axes to `size`; mode \"linear\" (default; also"]
            #[doc = " \"bilinear\", \"trilinear\"), \"nearest\" or \"nearest-exact\"."]
            "interpolate" interpolate(x, size "the size": Vec<usize> as "number[]";
                mode: Interpolation as "InterpolateMode" = Interpolation::Linear,
                align_corners "alignCorners": bool as "boolean" = false)
                => x.interpolate(&size, mode, align_corners)
        }
        $row! {
            #[doc = " Windows of `size` elements every `step` along `dim`: `dim` becomes the window"]
            #[doc = " count and a new last axis holds each window."]
            "unfold" unfold(x, dim: isize as "number", size: usize as "number",
                step: usize as "number") => x.unfold(dim, size, step)
        }
    };
    (@unary $row:ident $($js:literal $rs:ident $doc:literal),*) => {
        $( $row! { #[doc = $doc] $js $rs(x) => x.$rs() } )*
    };
    (@binary $row:ident $($js:literal $rs:ident $doc:literal),*) => {
        $(
            $row! {
                #[doc = $doc]
                #[doc = " `other` is a Tensor or a number (which takes this tensor's dtype); the two"]
                #[doc = " broadcast to a common shape."]
                $js $rs(x, other @ "scalar" "the other operand": Operand
                    as "Tensor | number | boolean") => x.$rs(other)
            }
        )*
    };
    (@reduce $row:ident $($js:literal $rs:ident $doc:literal),*) => {
        $(
            $row! {
                #[doc = $doc]
                $js $rs(x; axis @ "axes": Axes as "number | number[] | null" = Axes::All,
                    keepdim: bool as "boolean" = false) => x.$rs(axis, keepdim)
            }
        )*
    };
}
