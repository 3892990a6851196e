//! A character-level GPT trained on Shakespeare and sampled (nanoGPT's shakespeare_char, small):
//! `wgrad::nn::gpt::Gpt` (pre-LayerNorm blocks, causal self-attention, tanh-GELU MLP, the
//! output layer tied to the token embedding) trained with nanoGPT's recipe (AdamW, betas (0.9,
//! 0.99), weight decay 0.1 on the matrices, warmup then cosine decay of the learning rate) on
//! batches drawn on the device inside a `TinyJit`-captured step; a progress bar (loss, ms/step),
//! the validation loss every `EVAL_EVERY` steps and at the end, then a sample generated with a
//! key/value cache by a captured decode step (tokens/s).
//!
//! Data: `bash scripts/data.sh` (data/shakespeare/train.txt and val.txt; `WGRAD_DATA` moves
//! the directory). `scripts/gpt_torch.py` is the same run in PyTorch.
//!
//! Knobs: `N_LAYER` (2), `N_HEAD` (4), `N_EMBD` (64), `BLOCK` (64, the context), `BS` (16),
//! `STEPS` (2000), `LR` (1e-2, the peak), `WARMUP` (100), `SEED` (42), `DEV`, `JIT` (on unless
//! `JIT=0`), `EVAL_EVERY` (250), `EVAL_WINDOWS` (256: windows of the validation text in each
//! intermediate evaluation; the final one uses all of it), `SAMPLE` (300 tokens), `PROMPT`
//! ("\n"), `TEMP` (0.8), `TOP_K` (0: off), `TOP_P` (0.95; 1 is off), `BIAS` (0: no biases in
//! the Linear layers and LayerNorms, as nanoGPT's training script; 1: GPT-2's biases).
//! `--load model.safetensors` starts from saved weights (`STEPS=0` only samples);
//! `--save model.safetensors` writes the trained weights.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use wgrad::nn::gpt::{cosine_schedule, windows, Generator, Gpt, GptConfig, Sampling};
use wgrad::nn::optim::Optimizer;
use wgrad::nn::state::{get_parameters, get_state_dict, load_state_dict, safe_load, safe_save};
use wgrad::{Context, Device, Error, ErrorKind, Result, Tensor, TinyJit};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Windows of the validation text evaluated per call (the last batch of a pass is whole: a
/// pass covers the largest multiple of it that fits).
const EVAL_BATCH: usize = 128;

/// As in examples/mnist.rs: the loss is read back (which waits for the step) only this often.
const SHOW_EVERY: (Duration, usize) = (Duration::from_millis(250), 10);

fn bar(done: usize, steps: usize, loss: f32, val: f64, ms: f64) {
    let width = 30;
    let filled = done * width / steps.max(1);
    let eta = (steps - done) as f64 * ms / 1e3;
    let val = if val.is_nan() {
        "  -   ".to_string()
    } else {
        format!("{val:6.3}")
    };
    eprint!(
        "\r{done:5}/{steps} [{}{}] loss {loss:6.3}  val {val}  {ms:6.1} ms/step  {:2}:{:02} left ",
        "#".repeat(filled),
        "-".repeat(width - filled),
        eta as u64 / 60,
        eta as u64 % 60
    );
    let _ = std::io::stderr().flush();
}

fn read_text(name: &str) -> Result<Vec<u8>> {
    let dir = std::env::var("WGRAD_DATA").unwrap_or_else(|_| "data".into());
    let path = format!("{dir}/shakespeare/{name}");
    std::fs::read(&path).map_err(|e| {
        Error::new(
            ErrorKind::Other,
            format!("reading {path}: {e} (run bash scripts/data.sh)"),
        )
    })
}

fn main() -> Result<()> {
    let (train_text, val_text) = (read_text("train.txt")?, read_text("val.txt")?);
    // The vocabulary: every byte that occurs, in order (the texts are ASCII).
    let mut seen = [false; 256];
    for &b in train_text.iter().chain(&val_text) {
        seen[b as usize] = true;
    }
    let chars: Vec<u8> = (0..=255u8).filter(|&b| seen[b as usize]).collect();
    let mut stoi = [0u8; 256];
    for (i, &c) in chars.iter().enumerate() {
        stoi[c as usize] = i as u8;
    }
    let encode = |t: &[u8]| -> Vec<u8> { t.iter().map(|&b| stoi[b as usize]).collect() };
    let cfg = GptConfig {
        vocab_size: chars.len(),
        block_size: env("BLOCK", 64),
        n_layer: env("N_LAYER", 2),
        n_head: env("N_HEAD", 4),
        n_embd: env("N_EMBD", 64),
        bias: env("BIAS", 0) != 0,
    };
    let (bs, steps, lr, warmup) = (
        env("BS", 16),
        env("STEPS", 2000),
        env("LR", 1e-2),
        env("WARMUP", 100),
    );
    let (eval_every, eval_windows) = (env("EVAL_EVERY", 250usize).max(1), env("EVAL_WINDOWS", 256));
    let train_data = Tensor::from_vec(encode(&train_text), &[train_text.len()])?;
    let val_data = Tensor::from_vec(encode(&val_text), &[val_text.len()])?;

    Tensor::manual_seed(env("SEED", 42));
    let gpt = Gpt::new(cfg)?;
    if let Some(path) = arg("--load") {
        load_state_dict(&gpt, &safe_load(&path)?, true)?;
        eprintln!("loaded {path}");
    }
    let n_params: usize = get_parameters(&gpt).iter().map(|p| p.numel()).sum();
    eprintln!(
        "wgrad GPT on {}: {} layers, {} heads, width {}, context {}, vocabulary {}, {n_params} \
         parameters; Shakespeare {} train / {} validation characters; batch {bs}, {steps} steps",
        Device::default(),
        cfg.n_layer,
        cfg.n_head,
        cfg.n_embd,
        cfg.block_size,
        cfg.vocab_size,
        train_text.len(),
        val_text.len()
    );

    let mut opt = gpt.configure_optimizers(0.1, lr, (0.9, 0.99))?;
    if steps > 0 {
        opt.set_schedule(cosine_schedule(lr, warmup.min(steps - 1), steps))?;
    }
    let mut step =
        TinyJit::new(|_: &[Tensor]| Ok(vec![gpt.train_step(&mut opt, &train_data, bs)?]));
    // The validation loss: consecutive windows of BLOCK + 1 characters from the start of the
    // validation text, EVAL_BATCH per captured call; the start offsets are the input.
    let total_windows = (val_text.len() - 1) / cfg.block_size;
    if total_windows == 0 {
        return Err(Error::new(
            ErrorKind::Shape,
            format!(
                "the validation text is shorter than BLOCK + 1 = {}",
                cfg.block_size + 1
            ),
        ));
    }
    let eb = EVAL_BATCH.min(total_windows);
    let mut eval = TinyJit::new(|inputs: &[Tensor]| {
        Context::new().no_grad(true).run(|| {
            let w = windows(&val_data, &inputs[0], cfg.block_size + 1)?;
            Ok(vec![gpt.loss(&w)?])
        })
    });
    let mut val_loss = |windows: usize| -> Result<f64> {
        let batches = (windows / eb).clamp(1, total_windows / eb);
        let mut sum = 0.0;
        for b in 0..batches {
            let starts: Vec<i32> = (b * eb..(b + 1) * eb)
                .map(|w| (w * cfg.block_size) as i32)
                .collect();
            let starts = Tensor::from_vec(starts, &[eb])?;
            sum += eval.call(&[&starts])?[0].item::<f32>()? as f64;
        }
        Ok(sum / batches as f64)
    };

    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut val = f64::NAN;
    let (mut window, mut window_start) = (0usize, Instant::now());
    let mut replay = (0usize, Duration::ZERO);
    for i in 1..=steps {
        let out = step.call(&[])?.remove(0);
        window += 1;
        let evaluate = i % eval_every == 0 && i < steps;
        if evaluate
            || i == steps
            || i <= 2
            || window_start.elapsed() >= SHOW_EVERY.0
            || window >= SHOW_EVERY.1
        {
            let loss = out.item::<f32>()?;
            let dt = window_start.elapsed();
            let ms = dt.as_secs_f64() * 1e3 / window as f64;
            if i > 2 {
                replay = (replay.0 + window, replay.1 + dt);
            }
            if evaluate {
                val = val_loss(eval_windows)?;
                if tty {
                    eprint!("\r\x1b[2K");
                }
                eprintln!("step {i:5}  loss {loss:6.3}  val {val:6.4}  {ms:6.1} ms/step");
            }
            if tty && i < steps {
                bar(i, steps, loss, val, ms);
            }
            (window, window_start) = (0, Instant::now());
        }
    }
    if tty && steps > 0 {
        eprint!("\r\x1b[2K");
    }
    let train_s = start.elapsed().as_secs_f64();
    let per_step = replay.1.as_secs_f64() * 1e3 / replay.0.max(1) as f64;
    let whole = total_windows / eb * eb;
    let val = val_loss(whole)?;
    if steps == 0 {
        println!(
            "validation loss {val:.4} ({whole} windows of {})",
            cfg.block_size
        );
    } else {
        println!(
            "validation loss {val:.4} after {steps} steps ({whole} windows of {}; {train_s:.0} s, \
             {per_step:.1} ms per jitted step, {} launches per step)",
            cfg.block_size,
            step.launches()
        );
    }
    if let Some(path) = arg("--save") {
        safe_save(&get_state_dict(&gpt), std::path::Path::new(&path))?;
        eprintln!("saved {path}");
    }
    drop(step);

    // Generation: the prompt, then SAMPLE tokens streamed as they are drawn.
    let sampling = Sampling {
        temperature: env("TEMP", 0.8),
        top_k: Some(env("TOP_K", 0usize)).filter(|&k| k > 0),
        top_p: Some(env("TOP_P", 0.95)),
    };
    let prompt = std::env::var("PROMPT").unwrap_or_else(|_| "\n".into());
    if let Some(c) = prompt.bytes().find(|&b| !seen[b as usize]) {
        return Err(Error::new(
            ErrorKind::Other,
            format!(
                "PROMPT: the character {:?} is not in the vocabulary",
                c as char
            ),
        ));
    }
    let prompt: Vec<i32> = prompt.bytes().map(|b| stoi[b as usize] as i32).collect();
    let n = env("SAMPLE", 300usize);
    let mut gen = Generator::new(&gpt, 1, sampling)?;
    let mut out = std::io::stdout();
    let _ = out.write_all(
        &prompt
            .iter()
            .map(|&t| chars[t as usize])
            .collect::<Vec<u8>>(),
    );
    // Tokens after the first two (which run and capture the step) time the replays.
    let mut times = vec![];
    let t0 = Instant::now();
    gen.generate(&prompt, n, |t| {
        times.push(Instant::now());
        let _ = out.write_all(&[chars[t[0] as usize]]);
        let _ = out.flush();
    })?;
    println!();
    // Generated token j comes from call prompt.len() - 1 + j; calls 0 and 1 run and capture.
    let first = (3usize.saturating_sub(prompt.len())).max(1);
    let tps = match times.len() {
        k if k > first => (k - first) as f64 / (times[k - 1] - times[first - 1]).as_secs_f64(),
        _ => f64::NAN,
    };
    println!(
        "sampled {n} tokens in {:.1} s: {tps:.0} tokens/s replayed ({} launches per decode step; \
         temperature {}, top-k {:?}, top-p {:?})",
        t0.elapsed().as_secs_f64(),
        gen.launches(),
        sampling.temperature,
        sampling.top_k,
        sampling.top_p
    );
    Ok(())
}
