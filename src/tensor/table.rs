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
/// `Axes, Conv2dOpts, CrossEntropyOpts, DType, Operand, Reduction, Tensor` and the options of
/// the convolution block: `Conv1dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts, Interpolation,
/// PadMode, Pool2dOpts`.
#[macro_export]
macro_rules! for_each_op {
    ($row:ident) => {
        $crate::for_each_op!(@unary $row
            "neg" neg, "exp" exp, "exp2" exp2, "log" log, "log2" log2, "sqrt" sqrt,
            "rsqrt" rsqrt, "reciprocal" reciprocal, "sin" sin, "cos" cos, "tan" tan,
            "trunc" trunc, "floor" floor, "ceil" ceil, "round" round, "square" square,
            "abs" abs, "sign" sign, "relu" relu, "relu6" relu6, "sigmoid" sigmoid,
            "tanh" tanh, "gelu" gelu, "silu" silu, "swish" swish, "softplus" softplus,
            "mish" mish, "hardsigmoid" hardsigmoid, "hardswish" hardswish,
            "logicalNot" logical_not
        );
        $crate::for_each_op!(@binary $row
            "add" add, "sub" sub, "mul" mul, "div" div, "idiv" idiv, "mod" rem, "pow" pow,
            "maximum" maximum, "minimum" minimum, "lt" lt, "gt" gt, "le" le, "ge" ge,
            "eq" eq, "ne" ne, "xor" xor, "bitwiseAnd" bitand, "bitwiseOr" bitor,
            "lshift" shl, "rshift" shr
        );
        $crate::for_each_op!(@reduce $row
            "sum" sum, "mean" mean, "max" max, "min" min, "logsumexp" logsumexp
        );

        // Elementwise ops with arguments.
        $row! { "detach" detach(x) => Ok(x.detach()) }
        $row! { "contiguous" contiguous(x) => Ok(x.contiguous()) }
        $row! { "zerosLike" zeros_like(x) => Ok(x.zeros_like()) }
        $row! { "onesLike" ones_like(x) => Ok(x.ones_like()) }
        $row! { "fullLike" full_like(x, value: f64 as "number") => Ok(x.full_like(value)) }
        $row! { "cast" cast(x, dtype: DType as "DType") => x.cast(dtype) }
        $row! {
            #[doc = " `cond.where(a, b)`: `a` where the condition holds, else `b`."]
            "where" where_(x, a: Operand as "Tensor | number", b: Operand as "Tensor | number")
                => x.where_(a, b)
        }
        $row! {
            "logicalAnd" logical_and(x, other "the other operand": Tensor as "Tensor")
                => x.logical_and(&other)
        }
        $row! {
            "logicalOr" logical_or(x, other "the other operand": Tensor as "Tensor")
                => x.logical_or(&other)
        }
        $row! { "leakyRelu" leaky_relu(x; slope: f64 as "number" = 0.01) => x.leaky_relu(slope) }
        $row! { "elu" elu(x; alpha: f64 as "number" = 1.0) => x.elu(alpha) }
        $row! {
            "hardtanh" hardtanh(x; min: f64 as "number" = -1.0, max: f64 as "number" = 1.0)
                => x.hardtanh(min, max)
        }
        $row! { "clip" clip(x, min: f64 as "number", max: f64 as "number") => x.clip(min, max) }
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
            "std" std(x; axis @ "axes": Axes as "number | number[] | null" = Axes::All,
                keepdim: bool as "boolean" = false, correction: f64 as "number" = 1.0)
                => x.std(axis, keepdim, correction)
        }
        $row! {
            #[doc = " Softmax along `axis` (default -1)."]
            "softmax" softmax(x; axis: isize as "number" = -1) => x.softmax(axis)
        }
        $row! { "logSoftmax" log_softmax(x; axis: isize as "number" = -1) => x.log_softmax(axis) }

        // Movement.
        $row! {
            #[doc = " New shape (one entry may be -1)."]
            "reshape" reshape(x, shape: Vec<isize> as "number[]") => x.reshape(&shape)
        }
        $row! { "permute" permute(x, order: Vec<isize> as "number[]") => x.permute(&order) }
        $row! {
            #[doc = " Swap axes `a` and `b` (default 1 and 0, as in tinygrad)."]
            "transpose" transpose(x; a: isize as "number" = 1, b: isize as "number" = 0)
                => x.transpose(a, b)
        }
        $row! { "expand" expand(x, shape: Vec<isize> as "number[]") => x.expand(&shape) }
        $row! {
            "flatten" flatten(x; start_dim "startDim": isize as "number" = 0)
                => x.flatten(start_dim)
        }
        $row! { "squeeze" squeeze(x; axis: Option<isize> as "number | null" = None) => x.squeeze(axis) }
        $row! { "unsqueeze" unsqueeze(x, axis: isize as "number") => x.unsqueeze(axis) }
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
        $row! { "flip" flip(x, axes: Vec<isize> as "number | number[]") => x.flip(&axes) }
        $row! {
            "repeat" repeat(x, reps @ "repeats" "shape": Vec<usize> as "number[]")
                => x.repeat(&reps)
        }
        $row! {
            #[doc = " Rows selected by an integer tensor (`x[idx]`)."]
            "index" index(x, idx "the index": Tensor as "Tensor") => x.index(&idx)
        }
        $row! {
            "gather" gather(x, axis: isize as "number", index "the index": Tensor as "Tensor")
                => x.gather(axis, &index)
        }
        $row! {
            #[doc = " Split into pieces of the given sizes along `axis`."]
            "split" split(x, sizes "shape": Vec<usize> as "number[]"; axis: isize as "number" = 0)
                -> "Tensor[]" => x.split(&sizes, axis)
        }
        $row! {
            "chunk" chunk(x, n: usize as "number"; axis: isize as "number" = 0)
                -> "Tensor[]" => x.chunk(n, axis)
        }
        $row! {
            static "cat" cat(tensors: Vec<Tensor> as "Tensor[]"; axis: isize as "number" = 0)
                => Tensor::cat(&tensors.iter().collect::<Vec<_>>(), axis)
        }
        $row! {
            static "stack" stack(tensors: Vec<Tensor> as "Tensor[]"; axis: isize as "number" = 0)
                => Tensor::stack(&tensors.iter().collect::<Vec<_>>(), axis)
        }
        $row! {
            #[doc = " Write `value` into this tensor's buffer (in place, like an optimizer update)."]
            "assign" assign(x, value "the value": Tensor as "Tensor") => x.assign(&value)
        }

        // Neural-network functions and losses.
        $row! { "matmul" matmul(x, other "the other operand": Tensor as "Tensor") => x.matmul(&other) }
        $row! { "dot" dot(x, other "the other operand": Tensor as "Tensor") => x.dot(&other) }
        $row! {
            #[doc = " `x @ weight.T + bias` (weight is `[out, in]`)."]
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
            "binaryCrossentropy" binary_crossentropy(x, y "the target": Tensor as "Tensor";
                reduction: Reduction as "Reduction" = Reduction::Mean)
                => x.binary_crossentropy(&y, reduction)
        }
        $row! {
            "binaryCrossentropyLogits" binary_crossentropy_logits(x,
                y "the target": Tensor as "Tensor";
                reduction: Reduction as "Reduction" = Reduction::Mean)
                => x.binary_crossentropy_logits(&y, reduction)
        }
        $row! {
            "mse" mse(x, y "the target": Tensor as "Tensor";
                reduction: Reduction as "Reduction" = Reduction::Mean) => x.mse(&y, reduction)
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
    (@unary $row:ident $($js:literal $rs:ident),*) => {
        $( $row! { $js $rs(x) => x.$rs() } )*
    };
    (@binary $row:ident $($js:literal $rs:ident),*) => {
        $(
            $row! {
                $js $rs(x, other @ "scalar" "the other operand": Operand
                    as "Tensor | number | boolean") => x.$rs(other)
            }
        )*
    };
    (@reduce $row:ident $($js:literal $rs:ident),*) => {
        $(
            $row! {
                #[doc = " Reduce over `axis` (a number or an array; all axes when omitted)."]
                $js $rs(x; axis @ "axes": Axes as "number | number[] | null" = Axes::All,
                    keepdim: bool as "boolean" = false) => x.$rs(axis, keepdim)
            }
        )*
    };
}
