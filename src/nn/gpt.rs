//! A GPT in nanoGPT's shape (Karpathy's nanoGPT, itself GPT-2's): token and position
//! embeddings, `n_layer` pre-LayerNorm blocks (causal self-attention, then a tanh-GELU MLP of
//! width `4·n_embd`, each added to the residual stream), a final LayerNorm, and the output layer
//! tied to the token embedding (logits = `x · wteᵀ`, so `wte.weight` is learned by both ends).
//! Linear layers and LayerNorms have biases or not (`GptConfig::bias`: GPT-2 has them,
//! nanoGPT's training script leaves them out); there is no dropout.
//!
//! Training: [`Gpt::loss`] on windows of `block_size + 1` tokens, [`random_windows`] to draw a
//! batch on the device (so a `TinyJit` replay of the step needs no host work),
//! [`Gpt::configure_optimizers`] and [`cosine_schedule`] for nanoGPT's recipe.
//!
//! Generation: [`Generator`] runs one decode step at a time against a fixed-size key/value
//! cache ([`KvCache`]: per layer `[batch, n_head, block_size, head_dim]`, written in place at
//! the position given as an input tensor, with the causal mask computed from that tensor), so
//! `TinyJit` captures the step once and every later token replays the same kernels. The next
//! token is sampled on the device ([`sample`]: temperature, top-k, top-p).

use super::optim::{AdamW, LrSchedule, Optimizer, OptimizerGroup};
use super::{Embedding, LayerNorm, Linear};
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::jit::TinyJit;
use crate::s;
use crate::tensor::functional::CrossEntropyOpts;
use crate::tensor::Tensor;

/// The sizes of a [`Gpt`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GptConfig {
    /// Tokens (characters, for a char-level model).
    pub vocab_size: usize,
    /// The longest context (the position embedding's rows and the key/value cache's length).
    pub block_size: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads; `n_embd` must be a multiple.
    pub n_head: usize,
    /// The width of the residual stream.
    pub n_embd: usize,
    /// Biases in the Linear layers and LayerNorms (GPT-2's; nanoGPT trains without).
    pub bias: bool,
}

impl GptConfig {
    fn check(&self) -> Result<()> {
        let c = self;
        if c.vocab_size == 0 || c.block_size == 0 || c.n_layer == 0 || c.n_head == 0 {
            bail!(Shape, "Gpt: every size must be at least 1, got {c:?}");
        }
        if c.n_embd == 0 || c.n_embd % c.n_head != 0 {
            bail!(
                Shape,
                "Gpt: n_embd {} must be a positive multiple of n_head {}",
                c.n_embd,
                c.n_head
            );
        }
        Ok(())
    }
    /// The width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.n_embd / self.n_head
    }
}

/// Causal self-attention: one Linear makes queries, keys and values (`c_attn`, `n_embd → 3
/// n_embd`), `c_proj` mixes the heads' outputs.
pub struct Attention {
    /// `n_embd → 3·n_embd`: queries, keys and values.
    pub c_attn: Linear,
    /// `n_embd → n_embd`: mixes the heads' outputs.
    pub c_proj: Linear,
    /// Attention heads.
    pub n_head: usize,
}

/// The feed-forward part of a block: `c_proj(gelu(c_fc(x)))` with the tanh GELU.
pub struct Mlp {
    /// `n_embd → 4·n_embd`.
    pub c_fc: Linear,
    /// `4·n_embd → n_embd`.
    pub c_proj: Linear,
}

/// `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`.
pub struct Block {
    /// Before attention.
    pub ln_1: LayerNorm,
    /// Causal self-attention.
    pub attn: Attention,
    /// Before the feed-forward part.
    pub ln_2: LayerNorm,
    /// The feed-forward part.
    pub mlp: Mlp,
}

/// The model (see the module docs). State dict names follow nanoGPT's without its
/// `transformer.` prefix: `wte.weight`, `wpe.weight`, `h.0.ln_1.weight`, `h.0.attn.c_attn.weight`,
/// ..., `ln_f.weight`, with `.bias` beside each `.weight` of a Linear or LayerNorm when
/// `config.bias` (the tied output layer has no name of its own).
pub struct Gpt {
    /// The sizes.
    pub config: GptConfig,
    /// Token embedding `(vocab_size, n_embd)`, tied to the output layer.
    pub wte: Embedding,
    /// Position embedding `(block_size, n_embd)`.
    pub wpe: Embedding,
    /// The blocks, `n_layer` of them.
    pub h: Vec<Block>,
    /// The final LayerNorm.
    pub ln_f: LayerNorm,
}

crate::state!(Attention { c_attn, c_proj });
crate::state!(Mlp { c_fc, c_proj });
crate::state!(Block {
    ln_1,
    attn,
    ln_2,
    mlp
});
crate::state!(Gpt { wte, wpe, h, ln_f });

/// A learned parameter: `t` realized, with gradients on.
fn param(t: Tensor) -> Result<Tensor> {
    let t = t.contiguous().realize()?;
    t.set_requires_grad(true);
    Ok(t)
}

/// A Linear layer initialised as nanoGPT's: weight from N(0, std), bias 0.
fn linear(cin: usize, cout: usize, std: f64, bias: bool) -> Result<Linear> {
    Ok(Linear {
        weight: param(Tensor::normal(&[cout, cin], 0.0, std)?)?,
        bias: if bias {
            Some(param(Tensor::zeros(&[cout])?)?)
        } else {
            None
        },
    })
}

/// A LayerNorm over the last axis (eps 1e-5): weight 1, bias 0.
fn layer_norm(c: usize, bias: bool) -> Result<LayerNorm> {
    let mut ln = LayerNorm::new(&[c])?;
    if !bias {
        ln.bias = None;
    }
    Ok(ln)
}

fn embedding(rows: usize, width: usize) -> Result<Embedding> {
    Ok(Embedding {
        weight: param(Tensor::normal(&[rows, width], 0.0, 0.02)?)?,
        vocab_size: rows,
        embed_size: width,
    })
}

impl Attention {
    /// `[B, T, C]` → `[B, n_head, T, C / n_head]`.
    fn heads(&self, z: &Tensor) -> Result<Tensor> {
        let s = z.shape();
        z.reshape_u(&[s[0], s[1], self.n_head, s[2] / self.n_head])?
            .transpose(1, 2)
    }
    /// The queries, keys and values of `x` `[B, T, C]`, each `[B, n_head, T, head_dim]`.
    fn qkv(&self, x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let c = x.shape()[2];
        let parts = self.c_attn.forward(x)?.split(&[c, c, c], -1)?;
        Ok((
            self.heads(&parts[0])?,
            self.heads(&parts[1])?,
            self.heads(&parts[2])?,
        ))
    }
    /// `[B, n_head, T, head_dim]` back to `[B, T, C]`, through `c_proj`.
    fn merge(&self, y: &Tensor) -> Result<Tensor> {
        let s = y.shape();
        let y = y.transpose(1, 2)?.reshape_u(&[s[0], s[2], s[1] * s[3]])?;
        self.c_proj.forward(&y)
    }
    /// Causal self-attention over `x` `[B, T, n_embd]`: position `t` attends to positions `<= t`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (q, k, v) = self.qkv(x)?;
        self.merge(&q.scaled_dot_product_attention(&k, &v, None, 0.0, true, false)?)
    }
    /// One position: `x` `[B, 1, C]`; its key and value are written into the caches at `pos`
    /// and the query attends to the cache entries at positions `<= pos` (`keep`).
    fn decode(
        &self,
        x: &Tensor,
        kc: &Tensor,
        vc: &Tensor,
        pos: &Tensor,
        keep: &Tensor,
    ) -> Result<Tensor> {
        let (q, k, v) = self.qkv(x)?;
        kc.set(&s![.., .., pos], &k)?;
        vc.set(&s![.., .., pos], &v)?;
        self.merge(&q.scaled_dot_product_attention(kc, vc, Some(keep), 0.0, false, false)?)
    }
}

impl Mlp {
    /// `c_proj(gelu(c_fc(x)))` over the last axis of `x`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.c_proj.forward(&self.c_fc.forward(x)?.gelu()?)
    }
}

impl Block {
    /// The block applied to `x` `[B, T, n_embd]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.add(&self.attn.forward(&self.ln_1.forward(x)?)?)?;
        x.add(&self.mlp.forward(&self.ln_2.forward(&x)?)?)
    }
}

impl Gpt {
    /// A model initialised as nanoGPT's: Linear and Embedding weights from N(0, 0.02), the
    /// residual projections (`attn.c_proj`, `mlp.c_proj`) from N(0, 0.02 / sqrt(2 n_layer)),
    /// biases 0, LayerNorms 1 and 0 (on the default device, from the seeded generator).
    pub fn new(config: GptConfig) -> Result<Gpt> {
        config.check()?;
        let (c, bias) = (config.n_embd, config.bias);
        let proj_std = 0.02 / (2.0 * config.n_layer as f64).sqrt();
        let wte = embedding(config.vocab_size, c)?;
        let wpe = embedding(config.block_size, c)?;
        let h = (0..config.n_layer)
            .map(|_| {
                Ok(Block {
                    ln_1: layer_norm(c, bias)?,
                    attn: Attention {
                        c_attn: linear(c, 3 * c, 0.02, bias)?,
                        c_proj: linear(c, c, proj_std, bias)?,
                        n_head: config.n_head,
                    },
                    ln_2: layer_norm(c, bias)?,
                    mlp: Mlp {
                        c_fc: linear(c, 4 * c, 0.02, bias)?,
                        c_proj: linear(4 * c, c, proj_std, bias)?,
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Gpt {
            config,
            wte,
            wpe,
            h,
            ln_f: layer_norm(c, bias)?,
        })
    }

    /// Check that `idx` is integer `[B, T]` with `1 <= T <= t_max`.
    fn check_tokens(&self, op: &str, idx: &Tensor, t_max: usize) -> Result<(usize, usize)> {
        let s = idx.shape();
        if s.len() != 2 || s[1] == 0 || s[1] > t_max || !idx.dtype().is_int() {
            bail!(
                Shape,
                "Gpt.{op}: tokens must be integer [batch, time] with time at most {t_max}, got {s:?} {}",
                idx.dtype()
            );
        }
        Ok((s[0], s[1]))
    }

    /// The tied output layer: `[.., C]` → `[.., vocab_size]`.
    fn logits(&self, x: &Tensor) -> Result<Tensor> {
        self.ln_f.forward(x)?.matmul(&self.wte.weight.t()?)
    }

    /// Logits `[B, T, vocab_size]` of the tokens `idx` `[B, T]` (integers, `T <= block_size`),
    /// each position seeing itself and the positions before it.
    pub fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        let (_, t) = self.check_tokens("forward", idx, self.config.block_size)?;
        let mut x = self
            .wte
            .forward(idx)?
            .add(&self.wpe.weight.slice(0, 0, t as isize, 1)?)?;
        for b in &self.h {
            x = b.forward(&x)?;
        }
        self.logits(&x)
    }

    /// The mean cross-entropy of predicting each token of `windows` `[B, T + 1]` from the ones
    /// before it (inputs `windows[:, :-1]`, targets `windows[:, 1:]`).
    pub fn loss(&self, windows: &Tensor) -> Result<Tensor> {
        let (_, t1) = self.check_tokens("loss", windows, self.config.block_size + 1)?;
        if t1 < 2 {
            bail!(
                Shape,
                "Gpt.loss: windows {:?} need at least 2 tokens",
                windows.shape()
            );
        }
        let x = windows.slice(1, 0, t1 as isize - 1, 1)?.cast(DType::I32)?;
        let y = windows.slice(1, 1, t1 as isize, 1)?.cast(DType::I32)?;
        self.forward(&x)?
            .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())
    }

    /// nanoGPT's optimizer: AdamW (eps 1e-8) with `weight_decay` on the matrices (Linear and
    /// Embedding weights) and none on the biases and LayerNorms.
    pub fn configure_optimizers(
        &self,
        weight_decay: f64,
        lr: f64,
        betas: (f64, f64),
    ) -> Result<OptimizerGroup> {
        let params = super::state::get_parameters(self);
        let (mats, rest): (Vec<Tensor>, Vec<Tensor>) =
            params.into_iter().partition(|p| p.ndim() >= 2);
        let adamw = |ps: Vec<Tensor>, wd: f64| -> Result<Box<dyn Optimizer>> {
            Ok(Box::new(
                AdamW::new(ps)?
                    .lr(lr)
                    .b1(betas.0)
                    .b2(betas.1)
                    .weight_decay(wd),
            ))
        };
        OptimizerGroup::new(vec![adamw(mats, weight_decay)?, adamw(rest, 0.0)?])
    }

    /// One training step (what `TinyJit` captures): a batch of `batch` random windows of
    /// `data` (a 1-D tensor of token ids), the loss, backward and `opt`'s update, in training
    /// mode. Returns the loss, realized, computed with the weights the step started from.
    pub fn train_step(
        &self,
        opt: &mut dyn Optimizer,
        data: &Tensor,
        batch: usize,
    ) -> Result<Tensor> {
        Context::new().training(true).run(|| {
            let w = random_windows(data, batch, self.config.block_size + 1)?;
            opt.zero_grad();
            let loss = self.loss(&w)?;
            loss.backward()?;
            opt.step()?;
            loss.realize()
        })
    }

    /// An empty key/value cache for decoding `batch` sequences (zeros: the masked entries of
    /// unwritten positions must be finite, as attention multiplies them by 0).
    pub fn kv_cache(&self, batch: usize) -> Result<KvCache> {
        let c = &self.config;
        let shape = [batch, c.n_head, c.block_size, c.head_dim()];
        let zeros = || Tensor::zeros(&shape)?.contiguous().realize();
        let mut cache = KvCache {
            keys: vec![],
            values: vec![],
        };
        for _ in 0..c.n_layer {
            cache.keys.push(zeros()?);
            cache.values.push(zeros()?);
        }
        Ok(cache)
    }

    /// One decode step: the logits `[B, vocab_size]` of the next token after `tokens` `[B, 1]`
    /// (integers) at position `pos` (an integer tensor `[1]`, `0 <= pos < block_size`), whose
    /// keys and values are written into `cache` at `pos`; the cache's entries at earlier
    /// positions are the context. Equal to `forward` of the whole sequence at that position.
    /// Because the position is a tensor, every position runs the same kernels.
    pub fn decode(&self, cache: &KvCache, tokens: &Tensor, pos: &Tensor) -> Result<Tensor> {
        let (b, _) = self.check_tokens("decode", tokens, 1)?;
        let c = &self.config;
        if pos.shape() != [1] || !pos.dtype().is_int() {
            bail!(
                Shape,
                "Gpt.decode: the position must be an integer tensor of shape [1], got {:?} {}",
                pos.shape(),
                pos.dtype()
            );
        }
        let want = [b, c.n_head, c.block_size, c.head_dim()];
        if cache.keys.len() != c.n_layer
            || cache.values.len() != c.n_layer
            || cache
                .keys
                .iter()
                .chain(&cache.values)
                .any(|t| t.shape() != want)
        {
            bail!(
                Shape,
                "Gpt.decode: the cache must hold {} layers of keys and values {want:?} (Gpt.kv_cache({b}))",
                c.n_layer
            );
        }
        let pos = pos.cast(DType::I32)?;
        let mut x = self
            .wte
            .forward(tokens)?
            .add(&self.wpe.weight.get(&s![&pos])?)?;
        let keep = Tensor::arange(0.0, c.block_size as f64, 1.0, DType::I32)?.le(&pos)?;
        for (i, blk) in self.h.iter().enumerate() {
            let a = blk.attn.decode(
                &blk.ln_1.forward(&x)?,
                &cache.keys[i],
                &cache.values[i],
                &pos,
                &keep,
            )?;
            x = x.add(&a)?;
            x = x.add(&blk.mlp.forward(&blk.ln_2.forward(&x)?)?)?;
        }
        self.logits(&x)?.reshape_u(&[b, c.vocab_size])
    }
}

/// Per layer, the keys and values of the positions decoded so far: `[batch, n_head,
/// block_size, head_dim]` each, preallocated ([`Gpt::kv_cache`]) and written in place.
pub struct KvCache {
    /// Per layer, `[batch, n_head, block_size, head_dim]`.
    pub keys: Vec<Tensor>,
    /// Per layer, `[batch, n_head, block_size, head_dim]`.
    pub values: Vec<Tensor>,
}

/// `batch` windows of `len` consecutive tokens at uniformly random offsets of `data` (1-D),
/// drawn on the device (`randint` and a gather): `[batch, len]`, `data`'s dtype.
pub fn random_windows(data: &Tensor, batch: usize, len: usize) -> Result<Tensor> {
    let n = data.numel();
    if data.ndim() != 1 || len == 0 || n < len {
        bail!(
            Shape,
            "random_windows: data {:?} must be 1-D and hold at least {len} tokens",
            data.shape()
        );
    }
    let starts = Tensor::randint(&[batch], 0, (n - len + 1) as i64)?;
    windows(data, &starts, len)
}

/// The windows of `len` tokens of `data` (1-D) starting at `starts` (integers, `[batch]`):
/// `[batch, len]`.
pub fn windows(data: &Tensor, starts: &Tensor, len: usize) -> Result<Tensor> {
    let offsets = Tensor::arange(0.0, len as f64, 1.0, DType::I32)?.unsqueeze(0)?;
    let idx = starts.cast(DType::I32)?.unsqueeze(1)?.add(&offsets)?;
    data.get(&s![&idx])
}

/// nanoGPT's learning-rate schedule for `steps` steps from the peak `lr`: a linear warmup over
/// `warmup` steps (step `k` at `lr · (k + 1) / (warmup + 1)`), then a cosine decay from `lr`
/// to `lr / 10` at the last step. Computed on the device inside the step once set with
/// `Optimizer::set_schedule`, so a replayed step follows it with no host work.
pub fn cosine_schedule(lr: f64, warmup: usize, steps: usize) -> LrSchedule {
    LrSchedule::Cosine {
        warmup_steps: warmup,
        start_factor: 1.0 / (warmup + 1) as f64,
        total_steps: steps,
        min_lr: lr / 10.0,
    }
}

/// How the next token is drawn from the logits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Logits are divided by it; 0 takes the most likely token (greedy).
    pub temperature: f64,
    /// Keep only the `k` most likely tokens (ties at the k-th value are kept too).
    pub top_k: Option<usize>,
    /// Keep the most likely tokens whose probabilities sum to `p` (nucleus sampling): a
    /// token is kept when the tokens more likely than it sum to less than `p`.
    pub top_p: Option<f64>,
}

impl Sampling {
    /// Errors unless the temperature is finite and >= 0, top-k >= 1 and top-p in (0, 1].
    pub fn check(&self) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            bail!(
                Other,
                "sample: temperature must be a finite number >= 0, got {}",
                self.temperature
            );
        }
        if self.top_k == Some(0) {
            bail!(Other, "sample: top_k must be at least 1");
        }
        if let Some(p) = self.top_p {
            if !(p > 0.0 && p <= 1.0) {
                bail!(Other, "sample: top_p must be in (0, 1], got {p}");
            }
        }
        Ok(())
    }
}

impl Default for Sampling {
    /// Temperature 1, no top-k or top-p cut.
    fn default() -> Sampling {
        Sampling {
            temperature: 1.0,
            top_k: None,
            top_p: None,
        }
    }
}

/// Draw one token per row of `logits` `[B, V]` on the device: `[B, 1]` i32. Top-k compares
/// with the k-th largest logit (`topk`); top-p sorts the probabilities (descending), cuts
/// where their running sum (`cumsum`) reaches `p`, and draws from the rest (`multinomial`)
/// before mapping back through the sort's indices. Both sorts are `O(V²)` comparisons per row:
/// right for a character vocabulary, slow for tens of thousands of tokens.
pub fn sample(logits: &Tensor, s: &Sampling) -> Result<Tensor> {
    let shape = logits.shape();
    if shape.len() != 2 || !logits.dtype().is_float() {
        bail!(
            Shape,
            "sample: logits must be float [batch, vocab], got {shape:?} {}",
            logits.dtype()
        );
    }
    let v = shape[1];
    s.check()?;
    if s.temperature == 0.0 {
        return logits.argmax(Some(-1), true)?.cast(DType::I32);
    }
    let mut l = logits.div(s.temperature)?;
    if let Some(k) = s.top_k.filter(|&k| k < v) {
        let kth = l
            .topk(k, -1, true)?
            .0
            .slice(-1, k as isize - 1, k as isize, 1)?;
        l = l.lt(&kth)?.where_(f64::NEG_INFINITY, &l)?;
    }
    let probs = l.softmax(-1)?;
    match s.top_p.filter(|&p| p < 1.0) {
        Some(p) => {
            let (sorted, order) = probs.sort(-1, true)?;
            let before = sorted.cumsum(-1)?.sub(&sorted)?;
            let kept = before.lt(p)?.where_(&sorted, 0.0)?;
            order.gather(-1, &kept.multinomial(1, true)?)
        }
        None => probs.multinomial(1, true),
    }
}

type Step<'a> = Box<dyn FnMut(&[Tensor]) -> Result<Vec<Tensor>> + 'a>;

/// Autoregressive generation with a key/value cache and a captured decode step: the step
/// ([`Gpt::decode`], then [`sample`]) is a `TinyJit` whose inputs are the tokens `[B, 1]` and
/// the position `[1]`, so from the third token on every token replays the same launches.
///
/// When the context is full (`block_size` positions) the window slides: the cache restarts
/// from the last `block_size / 2` tokens, which are decoded again at positions `0..` (the
/// position embeddings are absolute, so cached keys cannot be shifted), and generation goes
/// on from there. That costs one extra step per token generated beyond the context, and each
/// token then sees between `block_size / 2` and `block_size - 1` tokens of context (nanoGPT
/// recomputes the last `block_size` every token).
pub struct Generator<'a> {
    step: TinyJit<Step<'a>>,
    block_size: usize,
    batch: usize,
    /// The next position to write.
    pos: usize,
    /// The tokens at positions `0..pos`, per row.
    context: Vec<Vec<i32>>,
}

impl<'a> Generator<'a> {
    /// A generator of `batch` sequences (with its own cache) drawing tokens as `sampling` says.
    pub fn new(gpt: &'a Gpt, batch: usize, sampling: Sampling) -> Result<Generator<'a>> {
        if batch == 0 {
            bail!(Shape, "Generator: batch must be at least 1");
        }
        sampling.check()?;
        let cache = gpt.kv_cache(batch)?;
        let f: Step<'a> = Box::new(move |inputs: &[Tensor]| {
            Context::new().no_grad(true).run(|| {
                let logits = gpt.decode(&cache, &inputs[0], &inputs[1])?;
                Ok(vec![sample(&logits, &sampling)?, logits])
            })
        });
        Ok(Generator {
            step: TinyJit::new(f),
            block_size: gpt.config.block_size,
            batch,
            pos: 0,
            context: vec![vec![]; batch],
        })
    }

    /// The position the next token goes to (the number of tokens in the context).
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Launches one replayed step makes (0 before the step is captured).
    pub fn launches(&self) -> usize {
        self.step.launches()
    }

    /// Forget the context (the cache is overwritten from position 0 on).
    pub fn reset(&mut self) {
        self.pos = 0;
        self.context.iter_mut().for_each(Vec::clear);
    }

    /// Decode one token per row (`tokens.len() == batch`) at the current position, sliding the
    /// window first if the context is full. Returns the sampled next tokens `[B, 1]` (i32) and
    /// the logits `[B, vocab_size]`, realized in the step's output buffers (the next step
    /// overwrites them: read them before).
    pub fn step(&mut self, tokens: &[i32]) -> Result<(Tensor, Tensor)> {
        if tokens.len() != self.batch {
            bail!(
                Shape,
                "Generator.step: {} tokens given for a batch of {}",
                tokens.len(),
                self.batch
            );
        }
        if self.pos == self.block_size {
            let keep = self.block_size / 2;
            let old = std::mem::replace(&mut self.context, vec![vec![]; self.batch]);
            self.pos = 0;
            for j in self.block_size - keep..self.block_size {
                let col: Vec<i32> = old.iter().map(|row| row[j]).collect();
                self.raw_step(&col)?;
            }
        }
        self.raw_step(tokens)
    }

    fn raw_step(&mut self, tokens: &[i32]) -> Result<(Tensor, Tensor)> {
        let t = Tensor::from_vec(tokens.to_vec(), &[self.batch, 1])?;
        let p = Tensor::from_vec(vec![self.pos as i32], &[1])?;
        let mut out = self.step.call(&[&t, &p])?;
        for (row, &tok) in self.context.iter_mut().zip(tokens) {
            row.push(tok);
        }
        self.pos += 1;
        let logits = out.pop().expect("two outputs");
        Ok((out.pop().expect("two outputs"), logits))
    }

    /// Feed `prompt` (the same for every row; at least one token) and generate `n` tokens per
    /// row, calling `on_token` with each step's tokens (one per row) as they arrive. Returns
    /// the generated tokens per row.
    pub async fn generate_async(
        &mut self,
        prompt: &[i32],
        n: usize,
        mut on_token: impl FnMut(&[i32]),
    ) -> Result<Vec<Vec<i32>>> {
        let Some((&last, head)) = prompt.split_last() else {
            bail!(Shape, "Generator.generate: the prompt is empty");
        };
        for &tok in head {
            self.step(&vec![tok; self.batch])?;
        }
        let mut next = vec![last; self.batch];
        let mut out = vec![vec![]; self.batch];
        for _ in 0..n {
            let (tokens, _) = self.step(&next)?;
            next = tokens.to_vec_async::<i32>().await?;
            for (row, &t) in out.iter_mut().zip(&next) {
                row.push(t);
            }
            on_token(&next);
        }
        Ok(out)
    }

    /// Blocking form of [`Generator::generate_async`] (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn generate(
        &mut self,
        prompt: &[i32],
        n: usize,
        on_token: impl FnMut(&[i32]),
    ) -> Result<Vec<Vec<i32>>> {
        crate::runtime::block_on(self.generate_async(prompt, n, on_token))
    }
}
