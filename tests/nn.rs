//! nn layers and the state module.
//!
//! * Layer fixtures (`tests/fixtures/nn.json`, written once by hand with
//!   `python3 scripts/gen_nn_fixtures.py`): BatchNorm (training output, updated running stats,
//!   input/weight/bias gradients, eval output), LayerNorm, GroupNorm, Embedding, Conv1d,
//!   ConvTranspose1d/2d, InstanceNorm, LayerNorm2d, RMSNorm and LSTMCell (outputs and
//!   gradients), against torch, on `Device::Interp`, `Device::Cpu` and wgpu. Parameters are loaded
//!   with `load_state_dict`; `loss = sum(out * upstream)` is backpropagated. Tolerances:
//!   `|got - want| <= atol + rtol * |want|`, forward atol 1e-5, gradients atol 1e-4, rtol 1e-3.
//! * `state!` names, `get_parameters` / `get_buffers`.
//! * The init helpers (`Tensor::kaiming_uniform` & co) against their distributions: bounds,
//!   mean, variance (and the normal's tail) over 65536 draws.
//! * safetensors: round trips through a file and through bytes (names, dtypes, shapes, values),
//!   a hand-built file in the format, malformed files.
//! * `load_state_dict`: values land in the model's own buffers; errors for names, shapes, dtypes.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use half::{bf16, f16};
use serde_json::Value;
use wgrad::nn::state::{
    get_buffers, get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_bytes,
    safe_save, safe_save_bytes,
};
use wgrad::nn::{
    BatchNorm, Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d, Embedding, GroupNorm,
    InstanceNorm, LayerNorm, LayerNorm2d, Linear, LstmCell, RmsNorm,
};
use wgrad::{Context, DType, Device, ErrorKind, Tensor};
use wgrad::{Conv1dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts, Padding1d};

const FIXTURE: &str = include_str!("fixtures/nn.json");
const FWD_ATOL: f64 = 1e-5;
const FWD_RTOL: f64 = 1e-3;
const GRAD_ATOL: f64 = 1e-4;
const GRAD_RTOL: f64 = 1e-3;

type R<T> = std::result::Result<T, String>;

trait Ctx<T> {
    fn ctx(self, what: &str) -> R<T>;
}

impl<T> Ctx<T> for wgrad::Result<T> {
    fn ctx(self, what: &str) -> R<T> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

// ------------------------------------------------------------------------------------ fixtures

fn shape_of(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect()
}

fn data_of(v: &Value) -> Vec<f64> {
    v["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|d| d.as_f64().expect("number"))
        .collect()
}

fn tensor_of(v: &Value) -> R<Tensor> {
    let shape = shape_of(v);
    let data = data_of(v);
    match v["dtype"].as_str().unwrap_or("f32") {
        "i32" => Tensor::from_vec(data.iter().map(|&x| x as i32).collect(), &shape),
        _ => Tensor::from_vec(data.iter().map(|&x| x as f32).collect(), &shape),
    }
    .ctx("fixture tensor")
}

fn compare(what: &str, got: &Tensor, want: &Value, atol: f64, rtol: f64) -> R<()> {
    let shape = shape_of(want);
    if got.shape() != shape {
        return Err(format!("{what}: shape {:?}, want {shape:?}", got.shape()));
    }
    let g = got.to_vec_f32().ctx(what)?;
    let w = data_of(want);
    let mut worst = (0.0f64, 0usize);
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let err = (a as f64 - b).abs() - (atol + rtol * b.abs());
        if err > worst.0 || !(a as f64).is_finite() {
            worst = (err.max(f64::MIN_POSITIVE), i);
        }
    }
    if worst.0 > 0.0 {
        let i = worst.1;
        return Err(format!(
            "{what}: element {i}: got {}, want {} (atol {atol}, rtol {rtol})",
            g[i], w[i]
        ));
    }
    Ok(())
}

fn arg_f64(args: &Value, key: &str) -> f64 {
    args[key].as_f64().expect(key)
}
fn arg_usize(args: &Value, key: &str) -> usize {
    args[key].as_u64().expect(key) as usize
}
fn arg_bool(args: &Value, key: &str) -> bool {
    args[key].as_bool().expect(key)
}

enum Layer {
    Bn(BatchNorm),
    Ln(LayerNorm),
    Gn(GroupNorm),
    Emb(Embedding),
    C1(Conv1d),
    Ct1(ConvTranspose1d),
    Ct2(ConvTranspose2d),
    In(InstanceNorm),
    Ln2(LayerNorm2d),
    Rms(RmsNorm),
    /// With its state inputs; the output is cat(h', c').
    Lstm(LstmCell, Option<(Tensor, Tensor)>),
}

/// A number (or the first of a pair) under `key`, else `default`.
fn arg_or(a: &Value, key: &str, default: usize) -> usize {
    match &a[key] {
        Value::Null => default,
        Value::Array(v) => v[0].as_u64().expect(key) as usize,
        v => v.as_u64().expect(key) as usize,
    }
}

/// The conv layers' options from torch's constructor keywords.
fn conv1d_opts(a: &Value) -> Conv1dOpts {
    let padding = match &a["padding"] {
        Value::String(s) if s == "same" => Padding1d::Same,
        Value::String(_) | Value::Null => Padding1d::Valid,
        v => Padding1d::Explicit(v.as_u64().expect("padding") as usize),
    };
    Conv1dOpts {
        stride: arg_or(a, "stride", 1),
        padding,
        dilation: arg_or(a, "dilation", 1),
        groups: arg_or(a, "groups", 1),
    }
}

impl Layer {
    fn build(kind: &str, a: &Value) -> R<Layer> {
        Ok(match kind {
            "batchnorm" => Layer::Bn(
                BatchNorm::with(
                    arg_usize(a, "num_features"),
                    arg_f64(a, "eps"),
                    arg_f64(a, "momentum"),
                    arg_bool(a, "affine"),
                )
                .ctx("BatchNorm::with")?,
            ),
            "layernorm" => {
                let shape: Vec<usize> = a["normalized_shape"]
                    .as_array()
                    .expect("normalized_shape")
                    .iter()
                    .map(|d| d.as_u64().expect("dim") as usize)
                    .collect();
                Layer::Ln(
                    LayerNorm::with(&shape, arg_f64(a, "eps"), arg_bool(a, "elementwise_affine"))
                        .ctx("LayerNorm::with")?,
                )
            }
            "groupnorm" => Layer::Gn(
                GroupNorm::with(
                    arg_usize(a, "num_groups"),
                    arg_usize(a, "num_channels"),
                    arg_f64(a, "eps"),
                    arg_bool(a, "affine"),
                )
                .ctx("GroupNorm::with")?,
            ),
            "embedding" => Layer::Emb(
                Embedding::new(arg_usize(a, "vocab_size"), arg_usize(a, "embed_size"))
                    .ctx("Embedding::new")?,
            ),
            "conv1d" => Layer::C1(
                Conv1d::with(
                    arg_usize(a, "in_channels"),
                    arg_usize(a, "out_channels"),
                    arg_usize(a, "kernel_size"),
                    conv1d_opts(a),
                    arg_bool(a, "bias"),
                )
                .ctx("Conv1d::with")?,
            ),
            "conv_transpose1d" => Layer::Ct1(
                ConvTranspose1d::with(
                    arg_usize(a, "in_channels"),
                    arg_usize(a, "out_channels"),
                    arg_usize(a, "kernel_size"),
                    ConvTranspose1dOpts {
                        stride: arg_or(a, "stride", 1),
                        padding: arg_or(a, "padding", 0),
                        output_padding: arg_or(a, "output_padding", 0),
                        dilation: arg_or(a, "dilation", 1),
                        groups: arg_or(a, "groups", 1),
                    },
                    arg_bool(a, "bias"),
                )
                .ctx("ConvTranspose1d::with")?,
            ),
            "conv_transpose2d" => {
                let two = |k: &str, d: usize| (arg_or(a, k, d), arg_or(a, k, d));
                let k = arg_usize(a, "kernel_size");
                Layer::Ct2(
                    ConvTranspose2d::with(
                        arg_usize(a, "in_channels"),
                        arg_usize(a, "out_channels"),
                        (k, k),
                        ConvTranspose2dOpts {
                            stride: two("stride", 1),
                            padding: two("padding", 0),
                            output_padding: two("output_padding", 0),
                            dilation: two("dilation", 1),
                            groups: arg_or(a, "groups", 1),
                        },
                        arg_bool(a, "bias"),
                    )
                    .ctx("ConvTranspose2d::with")?,
                )
            }
            "instancenorm" => Layer::In(
                InstanceNorm::with(
                    arg_usize(a, "num_features"),
                    arg_f64(a, "eps"),
                    arg_bool(a, "affine"),
                )
                .ctx("InstanceNorm::with")?,
            ),
            "layernorm2d" => Layer::Ln2(
                LayerNorm2d::with(
                    arg_usize(a, "num_channels"),
                    arg_f64(a, "eps"),
                    arg_bool(a, "elementwise_affine"),
                )
                .ctx("LayerNorm2d::with")?,
            ),
            "rmsnorm" => Layer::Rms(
                RmsNorm::with(
                    arg_usize(a, "dim"),
                    arg_f64(a, "eps"),
                    arg_bool(a, "elementwise_affine"),
                )
                .ctx("RmsNorm::with")?,
            ),
            "lstmcell" => Layer::Lstm(
                LstmCell::with(
                    arg_usize(a, "input_size"),
                    arg_usize(a, "hidden_size"),
                    arg_bool(a, "bias"),
                )
                .ctx("LstmCell::with")?,
                None,
            ),
            _ => return Err(format!("unknown layer {kind}")),
        })
    }
    fn forward(&self, x: &Tensor) -> wgrad::Result<Tensor> {
        match self {
            Layer::Bn(l) => l.forward(x),
            Layer::Ln(l) => l.forward(x),
            Layer::Gn(l) => l.forward(x),
            Layer::Emb(l) => l.forward(x),
            Layer::C1(l) => l.forward(x),
            Layer::Ct1(l) => l.forward(x),
            Layer::Ct2(l) => l.forward(x),
            Layer::In(l) => l.forward(x),
            Layer::Ln2(l) => l.forward(x),
            Layer::Rms(l) => l.forward(x),
            Layer::Lstm(l, hc) => {
                let (h, c) = l.forward(x, hc.as_ref().map(|(h, c)| (h, c)))?;
                Tensor::cat(&[&h, &c], 1)
            }
        }
    }
    fn state(&self) -> Vec<(String, Tensor)> {
        match self {
            Layer::Bn(l) => get_state_dict(l),
            Layer::Ln(l) => get_state_dict(l),
            Layer::Gn(l) => get_state_dict(l),
            Layer::Emb(l) => get_state_dict(l),
            Layer::C1(l) => get_state_dict(l),
            Layer::Ct1(l) => get_state_dict(l),
            Layer::Ct2(l) => get_state_dict(l),
            Layer::In(l) => get_state_dict(l),
            Layer::Ln2(l) => get_state_dict(l),
            Layer::Rms(l) => get_state_dict(l),
            Layer::Lstm(l, _) => get_state_dict(l),
        }
    }
    fn load(&self, state: &[(String, Tensor)]) -> wgrad::Result<()> {
        // Strict: the fixtures hold every tensor a PyTorch state dict of the layer has.
        match self {
            Layer::Bn(l) => load_state_dict(l, state, false),
            Layer::Ln(l) => load_state_dict(l, state, false),
            Layer::Gn(l) => load_state_dict(l, state, false),
            Layer::Emb(l) => load_state_dict(l, state, false),
            Layer::C1(l) => load_state_dict(l, state, true),
            Layer::Ct1(l) => load_state_dict(l, state, true),
            Layer::Ct2(l) => load_state_dict(l, state, true),
            Layer::In(l) => load_state_dict(l, state, true),
            Layer::Ln2(l) => load_state_dict(l, state, true),
            Layer::Rms(l) => load_state_dict(l, state, true),
            Layer::Lstm(l, _) => load_state_dict(l, state, true),
        }
    }
}

fn run_case(case: &Value, dev: Device) -> R<()> {
    let kind = case["layer"].as_str().expect("layer");
    let mut layer = Layer::build(kind, &case["args"])?;
    // Extra inputs (the LSTM cell's state), differentiated like x.
    let mut inputs: Vec<(String, Tensor)> = vec![];
    if let Some(extra) = case.get("inputs").and_then(Value::as_object) {
        for (name, v) in extra {
            let t = tensor_of(v)?;
            t.set_requires_grad(true);
            inputs.push((name.clone(), t));
        }
    }
    if let Layer::Lstm(_, hc) = &mut layer {
        let get = |n: &str| inputs.iter().find(|(k, _)| k == n).map(|(_, t)| t.clone());
        if let (Some(h), Some(c)) = (get("h0"), get("c0")) {
            *hc = Some((h, c));
        }
    }
    let own = layer.state();
    let mut params = Vec::new();
    for (name, v) in case["params"].as_object().expect("params") {
        params.push((name.clone(), tensor_of(v)?));
    }
    layer.load(&params).ctx("load_state_dict")?;
    let find = |name: &str| {
        own.iter()
            .chain(&inputs)
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| format!("layer has no tensor '{name}'"))
    };
    let x = tensor_of(&case["x"])?;
    if x.dtype() == DType::F32 {
        x.set_requires_grad(true);
    }
    let out = layer.forward(&x).ctx("forward")?;
    compare("output", &out, &case["out"], FWD_ATOL, FWD_RTOL)?;
    let up = tensor_of(&case["upstream"])?;
    out.mul(&up)
        .and_then(|l| l.sum((), false))
        .and_then(|l| l.backward())
        .ctx("backward")?;
    for (name, want) in case["grads"].as_object().expect("grads") {
        let t = if name == "x" { x.clone() } else { find(name)? };
        let g = t.grad().ok_or_else(|| format!("no gradient for {name}"))?;
        compare(&format!("grad of {name}"), &g, want, GRAD_ATOL, GRAD_RTOL)?;
    }
    if let Some(after) = case.get("after") {
        for name in ["running_mean", "running_var"] {
            compare(name, &find(name)?, &after[name], FWD_ATOL, FWD_RTOL)?;
        }
        let nbt = find("num_batches_tracked")?.item::<i32>().ctx("nbt")?;
        let want = after["num_batches_tracked"].as_i64().expect("nbt");
        if nbt as i64 != want {
            return Err(format!("num_batches_tracked {nbt}, want {want}"));
        }
    }
    if let Some(want) = case.get("eval_out") {
        let out = Context::new()
            .training(false)
            .run(|| layer.forward(&x.detach()))
            .ctx("eval forward")?;
        compare("eval output", &out, want, FWD_ATOL, FWD_RTOL)?;
    }
    // Everything created above lives on the device under test.
    for (name, t) in layer.state() {
        if t.device() != dev {
            return Err(format!("{name} is on {}, not {dev}", t.device()));
        }
    }
    Ok(())
}

fn run_fixtures(dev: Device) {
    if let Err(e) = dev.available() {
        panic!("device {dev} unavailable: {e}");
    }
    let root: Value = serde_json::from_str(FIXTURE).expect("fixture JSON");
    let cases = root["cases"].as_array().expect("cases");
    assert!(cases.len() >= 10, "too few fixture cases");
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let r = Context::new()
            .dev(dev)
            .training(true)
            .run(|| run_case(case, dev));
        if let Err(e) = r {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed on {dev}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn layer_fixtures_interp() {
    run_fixtures(Device::Interp);
}

#[test]
fn layer_fixtures_cpu() {
    run_fixtures(Device::Cpu);
}

#[test]
fn layer_fixtures_wgpu() {
    if common::usable(Device::Wgpu) {
        run_fixtures(Device::Wgpu);
    }
}

// ------------------------------------------------------------------------------------ layers

#[test]
fn layer_init_and_errors() {
    Context::new().dev(Device::Interp).run(|| {
        let bn = BatchNorm::new(3).unwrap();
        for t in [&bn.running_mean, &bn.running_var, &bn.num_batches_tracked] {
            assert!(!t.requires_grad());
            assert!(t.is_realized(), "{t:?}");
        }
        assert_eq!(bn.running_var.to_vec::<f32>().unwrap(), vec![1.0; 3]);
        assert_eq!(bn.num_batches_tracked.shape(), Vec::<usize>::new());
        assert_eq!(bn.num_batches_tracked.dtype(), DType::I32);
        assert!(bn.weight.as_ref().unwrap().requires_grad());
        let x = Tensor::randn(&[2, 4, 3]).unwrap();
        assert_eq!(bn.forward(&x).unwrap_err().kind, ErrorKind::Shape);
        let one = Tensor::randn(&[1, 3]).unwrap();
        let r = Context::new().training(true).run(|| bn.forward(&one));
        assert_eq!(r.unwrap_err().kind, ErrorKind::Shape);
        assert!(bn.forward(&one).is_ok(), "eval mode works on one sample");

        let ln = LayerNorm::new(&[4]).unwrap();
        assert_eq!(ln.forward(&x).unwrap_err().kind, ErrorKind::Shape);
        assert!(LayerNorm::new(&[]).is_err());
        assert!(GroupNorm::new(3, 4).is_err());
        assert!(GroupNorm::new(0, 4).is_err());
        let gn = GroupNorm::new(2, 4).unwrap();
        assert_eq!(gn.forward(&x).unwrap().shape(), vec![2, 4, 3]);
        assert_eq!(
            gn.forward(&Tensor::randn(&[2, 3, 3]).unwrap())
                .unwrap_err()
                .kind,
            ErrorKind::Shape
        );

        let emb = Embedding::new(10, 6).unwrap();
        assert!(emb.weight.requires_grad());
        let w = emb.weight.to_vec::<f32>().unwrap();
        let b = (6.0f32 / 16.0).sqrt();
        assert!(w.iter().all(|v| v.abs() <= b), "glorot-uniform bound");
        let idx = Tensor::from_vec(vec![1i32, 9, 0, 1], &[2, 1, 2]).unwrap();
        let out = emb.forward(&idx).unwrap();
        assert_eq!(out.shape(), vec![2, 1, 2, 6]);
        let o = out.to_vec::<f32>().unwrap();
        assert_eq!(&o[..6], &w[6..12]);
        assert_eq!(&o[6..12], &w[54..60]);
        let fidx = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
        assert_eq!(emb.forward(&fidx).unwrap_err().kind, ErrorKind::DType);
    });
}

/// Two training steps accumulate into the running stats (the second update reads the first).
#[test]
fn batchnorm_two_steps() {
    Context::new().dev(Device::Interp).training(true).run(|| {
        let bn = BatchNorm::new(2).unwrap();
        let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0, 6.0], &[2, 2]).unwrap();
        bn.forward(&x).unwrap();
        bn.forward(&x).unwrap();
        // Channels (1, 2) and (3, 6): batch mean (1.5, 4.5), unbiased var (0.5, 4.5).
        let m = bn.running_mean.to_vec::<f32>().unwrap();
        let v = bn.running_var.to_vec::<f32>().unwrap();
        let mean = |b: f32| 0.9 * (0.9 * 0.0 + 0.1 * b) + 0.1 * b;
        let var = |b: f32| 0.9 * (0.9 * 1.0 + 0.1 * b) + 0.1 * b;
        assert!((m[0] - mean(1.5)).abs() < 1e-6 && (m[1] - mean(4.5)).abs() < 1e-6);
        assert!((v[0] - var(0.5)).abs() < 1e-5 && (v[1] - var(4.5)).abs() < 1e-5);
        assert_eq!(bn.num_batches_tracked.item::<i32>().unwrap(), 2);
        assert!(get_buffers(&bn).iter().any(|t| t.same(&bn.running_mean)));
    });
}

// ------------------------------------------------------------------------------------ state

struct Block {
    conv: Conv2d,
    bn: BatchNorm,
}
wgrad::state!(Block { conv, bn });

struct Net {
    blocks: Vec<Block>,
    norm: Option<LayerNorm>,
    none: Option<Linear>,
    heads: [Linear; 2],
    emb: Embedding,
    scale: Tensor,
}
wgrad::state!(Net {
    blocks,
    norm,
    none,
    heads,
    emb,
    scale,
});

struct Pair(Linear, GroupNorm);
wgrad::state!(Pair { 0, 1 });

struct Empty;
wgrad::state!(Empty {});

fn net() -> Net {
    let scale = Tensor::from_vec(vec![2.0f32], &[1]).unwrap();
    Net {
        blocks: vec![
            Block {
                conv: Conv2d::new(1, 2, (3, 3)).unwrap(),
                bn: BatchNorm::new(2).unwrap(),
            },
            Block {
                conv: Conv2d::with(2, 2, (1, 1), Default::default(), false).unwrap(),
                bn: BatchNorm::with(2, 1e-5, 0.1, false).unwrap(),
            },
        ],
        norm: Some(LayerNorm::new(&[4]).unwrap()),
        none: None,
        heads: [
            Linear::new(4, 3).unwrap(),
            Linear::with(4, 3, false).unwrap(),
        ],
        emb: Embedding::new(5, 4).unwrap(),
        scale,
    }
}

#[test]
fn state_dict_names() {
    Context::new().dev(Device::Interp).run(|| {
        let n = net();
        let sd = get_state_dict(&n);
        let names: Vec<&str> = sd.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "blocks.0.conv.weight",
                "blocks.0.conv.bias",
                "blocks.0.bn.weight",
                "blocks.0.bn.bias",
                "blocks.0.bn.running_mean",
                "blocks.0.bn.running_var",
                "blocks.0.bn.num_batches_tracked",
                "blocks.1.conv.weight",
                "blocks.1.bn.running_mean",
                "blocks.1.bn.running_var",
                "blocks.1.bn.num_batches_tracked",
                "norm.weight",
                "norm.bias",
                "heads.0.weight",
                "heads.0.bias",
                "heads.1.weight",
                "emb.weight",
                "scale",
            ]
        );
        assert!(sd[0].1.same(&n.blocks[0].conv.weight));
        // Same order every time.
        let again: Vec<String> = get_state_dict(&n).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, again);

        let params = get_parameters(&n);
        assert_eq!(
            params.len(),
            11,
            "every learned weight, no running stats, no `scale`"
        );
        assert!(params.iter().all(|t| t.requires_grad()));
        assert!(params[0].same(&n.blocks[0].conv.weight));
        let buffers = get_buffers(&n);
        assert_eq!(buffers.len(), 7);

        let p = Pair(Linear::new(2, 2).unwrap(), GroupNorm::new(1, 2).unwrap());
        let names: Vec<String> = get_state_dict(&p).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["0.weight", "0.bias", "1.weight", "1.bias"]);
        assert!(get_state_dict(&Empty).is_empty());

        // Tied weights: both names, one parameter.
        let l = Linear::new(2, 2).unwrap();
        let tied = vec![l.weight.clone(), l.weight.clone()];
        assert_eq!(get_state_dict(&tied).len(), 2);
        assert_eq!(get_parameters(&tied).len(), 1);
    });
}

fn temp_path(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("wgrad-nn-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{tag}.safetensors"))
}

fn mixed_state() -> Vec<(String, Tensor)> {
    let f: Vec<f32> = (0..24).map(|i| i as f32 * 0.25 - 3.0).collect();
    let h: Vec<f16> = [1.5f32, -2.0, 0.333, 65504.0, -0.0, 7.0]
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    // bf16 at its extremes: the largest finite value, a subnormal, -0.
    let g: Vec<bf16> = [1.5f32, -2.0, 0.333, 3.3895314e38, -0.0, 1e-40]
        .iter()
        .map(|&v| bf16::from_f32(v))
        .collect();
    vec![
        ("z.f32".into(), Tensor::from_vec(f, &[2, 3, 4]).unwrap()),
        ("a.f16".into(), Tensor::from_vec(h, &[3, 2]).unwrap()),
        (
            "m.i32".into(),
            Tensor::from_vec(vec![-7i32, 0, i32::MAX, i32::MIN, 42], &[5]).unwrap(),
        ),
        (
            "b.u8".into(),
            Tensor::from_vec(vec![0u8, 1, 200, 255], &[2, 2]).unwrap(),
        ),
        (
            "c.bool".into(),
            Tensor::from_vec(vec![true, false, false], &[3]).unwrap(),
        ),
        (
            "u.u32".into(),
            Tensor::from_vec(vec![u32::MAX, 3], &[2]).unwrap(),
        ),
        ("s.scalar".into(), Tensor::scalar(2.5)),
        // A lazy (unrealized) tensor is computed on save.
        (
            "lazy".into(),
            Tensor::arange(0.0, 6.0, 1.0, DType::F32)
                .unwrap()
                .mul(2.0)
                .unwrap()
                .reshape(&[2, 3])
                .unwrap(),
        ),
        ("w.bf16".into(), Tensor::from_vec(g, &[2, 3]).unwrap()),
    ]
}

fn assert_same_state(a: &[(String, Tensor)], b: &[(String, Tensor)]) {
    let names_a: Vec<&str> = a.iter().map(|(n, _)| n.as_str()).collect();
    let names_b: Vec<&str> = b.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names_a, names_b, "names and their order");
    for ((n, x), (_, y)) in a.iter().zip(b) {
        assert_eq!(x.dtype(), y.dtype(), "{n}");
        assert_eq!(x.shape(), y.shape(), "{n}");
        let bx = wgrad::runtime::block_on(x.bytes_async()).unwrap();
        let by = wgrad::runtime::block_on(y.bytes_async()).unwrap();
        assert_eq!(bx, by, "{n}");
    }
}

#[test]
fn safetensors_round_trip() {
    for dev in [Device::Interp, Device::Cpu] {
        Context::new().dev(dev).run(|| {
            let st = mixed_state();
            let bytes = safe_save_bytes(&st).unwrap();
            let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
            assert_eq!(n % 8, 0, "header padded to 8 bytes");
            let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
            assert_eq!(header["a.f16"]["dtype"], "F16");
            // bf16 is stored as itself: 2 bytes an element.
            assert_eq!(header["w.bf16"]["dtype"], "BF16");
            let offs = &header["w.bf16"]["data_offsets"];
            assert_eq!(offs[1].as_u64().unwrap() - offs[0].as_u64().unwrap(), 12);
            assert_eq!(header["c.bool"]["dtype"], "BOOL");
            assert_eq!(header["s.scalar"]["shape"], serde_json::json!([]));
            assert_eq!(header["z.f32"]["data_offsets"], serde_json::json!([0, 96]));
            let back = safe_load_bytes(&bytes).unwrap();
            assert_same_state(&st, &back);
            assert!(back.iter().all(|(_, t)| t.device() == dev));
            assert_eq!(
                back[4].1.to_vec::<bool>().unwrap(),
                vec![true, false, false]
            );
            assert_eq!(
                back[7].1.to_vec::<f32>().unwrap(),
                vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
            );
            assert_eq!(back[8].1.dtype(), DType::BF16);
            // Rounded as PyTorch rounds them (1e-40 to the subnormal 0x0001).
            assert_eq!(
                back[8].1.to_vec_f32().unwrap(),
                vec![
                    1.5,
                    -2.0,
                    0.33203125,
                    3.3895314e38,
                    -0.0,
                    f32::from_bits(0x0001_0000)
                ]
            );

            let path = temp_path(&format!("round-trip-{dev}"));
            safe_save(&st, &path).unwrap();
            let back = safe_load(&path).unwrap();
            assert_same_state(&st, &back);
            std::fs::remove_file(&path).unwrap();

            // Duplicate or reserved names cannot be saved.
            let dup = vec![st[0].clone(), st[0].clone()];
            assert!(safe_save_bytes(&dup).is_err());
            let reserved = vec![("__metadata__".to_string(), st[0].1.clone())];
            assert!(safe_save_bytes(&reserved).is_err());
        });
    }
}

/// A file written by someone else: `__metadata__`, keys out of data order, header padded,
/// I64 (torch's `num_batches_tracked`), F64 and BF16 data (BF16 loads as bf16).
fn hand_built(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.to_string();
    while h.len() % 8 != 0 {
        h.push(' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn safetensors_foreign_file() {
    Context::new().dev(Device::Interp).run(|| {
        let mut data = Vec::new();
        for v in [1.0f32, -2.5, 3.25, 4.0] {
            data.extend_from_slice(&v.to_le_bytes()); // 0..16: w (2, 2) F32
        }
        data.extend_from_slice(&7i64.to_le_bytes()); // 16..24: n () I64
        data.extend_from_slice(&0.1f64.to_le_bytes()); // 24..32: d (1,) F64
        data.extend_from_slice(&0x3fc0u16.to_le_bytes()); // 32..34: h (1,) BF16 = 1.5
        data.extend_from_slice(&[1, 0]); // 34..36: m (2,) BOOL
        let header = r#"{"__metadata__":{"format":"pt"},
            "m":{"dtype":"BOOL","shape":[2],"data_offsets":[34,36]},
            "w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},
            "n":{"dtype":"I64","shape":[],"data_offsets":[16,24]},
            "h":{"dtype":"BF16","shape":[1],"data_offsets":[32,34]},
            "d":{"dtype":"F64","shape":[1],"data_offsets":[24,32]}}"#;
        let st = safe_load_bytes(&hand_built(header, &data)).unwrap();
        let names: Vec<&str> = st.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["w", "n", "d", "h", "m"], "data order");
        assert_eq!(st[0].1.shape(), vec![2, 2]);
        assert_eq!(st[0].1.to_vec::<f32>().unwrap(), vec![1.0, -2.5, 3.25, 4.0]);
        assert_eq!(st[1].1.dtype(), DType::I32);
        assert_eq!(st[1].1.to_vec::<i32>().unwrap(), vec![7]);
        assert_eq!(st[2].1.to_vec::<f32>().unwrap(), vec![0.1f32]);
        assert_eq!(st[3].1.dtype(), DType::BF16);
        assert_eq!(st[3].1.to_vec::<bf16>().unwrap(), vec![bf16::from_f32(1.5)]);
        assert_eq!(st[4].1.to_vec::<bool>().unwrap(), vec![true, false]);

        // A torch-style BatchNorm state dict loads into BatchNorm (I64 counter -> i32).
        let mut data = Vec::new();
        for v in [1.0f32, 2.0, 0.5, -0.5, 0.1, 0.2, 1.1, 1.2] {
            data.extend_from_slice(&v.to_le_bytes());
        }
        data.extend_from_slice(&3i64.to_le_bytes());
        let header = r#"{"weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
            "bias":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},
            "running_mean":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},
            "running_var":{"dtype":"F32","shape":[2],"data_offsets":[24,32]},
            "num_batches_tracked":{"dtype":"I64","shape":[],"data_offsets":[32,40]}}"#;
        let st = safe_load_bytes(&hand_built(header, &data)).unwrap();
        let bn = BatchNorm::new(2).unwrap();
        load_state_dict(&bn, &st, true).unwrap();
        assert_eq!(bn.running_var.to_vec::<f32>().unwrap(), vec![1.1, 1.2]);
        assert_eq!(bn.num_batches_tracked.item::<i32>().unwrap(), 3);
    });
}

#[test]
fn safetensors_malformed() {
    Context::new().dev(Device::Interp).run(|| {
        let good = safe_save_bytes(&mixed_state()).unwrap();
        assert!(safe_load_bytes(&good).is_ok());
        // Every truncation fails (the last tensor's data is cut, or the header).
        for cut in [0, 3, 8, 9, 20, good.len() / 2, good.len() - 1] {
            assert!(safe_load_bytes(&good[..cut]).is_err(), "truncated at {cut}");
        }
        let f32_data = [0u8; 16];
        let bad_headers = [
            r#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}"#, // bad JSON
            r#"[1, 2]"#,
            r#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,32]}}"#, // past the end
            r#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[8,4]}}"#,
            r#"{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}}"#, // size mismatch
            r#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0]}}"#,
            r#"{"w":{"dtype":"F32","shape":[-2,2],"data_offsets":[0,16]}}"#,
            r#"{"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}}"#,
            r#"{"w":{"dtype":"C64","shape":[2],"data_offsets":[0,16]}}"#,
            r#"{"w":{"shape":[4],"data_offsets":[0,16]}}"#,
            r#"{"w":{"dtype":"F32","data_offsets":[0,16]}}"#,
            r#"{"w":7}"#,
            r#"{"__metadata__":3}"#,
            r#"{"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}"#, // value > i32
        ];
        let mut i64_data = 5_000_000_000i64.to_le_bytes().to_vec();
        i64_data.extend_from_slice(&1i64.to_le_bytes());
        for h in bad_headers {
            let data: &[u8] = if h.contains("I64") { &i64_data } else { &f32_data };
            let r = safe_load_bytes(&hand_built(h, data));
            assert!(r.is_err(), "accepted {h}");
        }
        // A zero-element tensor is valid safetensors (an empty tensor).
        let h = r#"{"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}"#;
        let sd = safe_load_bytes(&hand_built(h, &f32_data)).unwrap();
        assert_eq!((sd[0].0.as_str(), sd[0].1.shape()), ("w", vec![0]));
        // Header length larger than the file, or absurdly large.
        let mut b = good.clone();
        b[..8].copy_from_slice(&(good.len() as u64).to_le_bytes());
        assert!(safe_load_bytes(&b).is_err());
        b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(safe_load_bytes(&b).is_err());
        // Header not UTF-8.
        let mut b = hand_built("{}      ", &[]);
        b[9] = 0xff;
        assert!(safe_load_bytes(&b).is_err());
        // An empty file is valid JSON-wise.
        assert!(safe_load_bytes(&hand_built("{}", &[])).unwrap().is_empty());
        // Missing file.
        let e = safe_load(temp_path("does-not-exist")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Io);
    });
}

#[test]
fn load_state_dict_into_model() {
    Context::new().dev(Device::Cpu).run(|| {
        let a = net();
        let b = net();
        let before: Vec<Tensor> = get_state_dict(&b).into_iter().map(|(_, t)| t).collect();
        // Through a file, so the values are fresh tensors.
        let path = temp_path("model");
        safe_save(&get_state_dict(&a), &path).unwrap();
        let loaded = safe_load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        load_state_dict(&b, &loaded, true).unwrap();
        let after = get_state_dict(&b);
        for ((name, t), old) in after.iter().zip(&before) {
            assert!(t.same(old), "{name} keeps its identity");
            assert!(t.is_realized(), "{name}: {t:?}");
        }
        assert_same_state(&get_state_dict(&a), &after);
        assert!(b.heads[0].weight.requires_grad());

        // Values from another device are moved.
        let w = Context::new()
            .dev(Device::Interp)
            .run(|| Tensor::from_vec(vec![3.0f32], &[1]).unwrap());
        load_state_dict(&b, &[("scale".to_string(), w)], false).unwrap();
        assert_eq!(b.scale.to_vec::<f32>().unwrap(), vec![3.0]);
        assert_eq!(b.scale.device(), Device::Cpu);

        // Errors name the problem; the model is left unchanged.
        let keep = b.heads[0].weight.to_vec::<f32>().unwrap();
        let mut missing = loaded.clone();
        missing.retain(|(n, _)| n != "emb.weight");
        let e = load_state_dict(&b, &missing, true).unwrap_err();
        assert!(
            e.msg.contains("missing") && e.msg.contains("emb.weight"),
            "{e}"
        );
        assert!(load_state_dict(&b, &missing, false).is_ok());

        let mut extra = loaded.clone();
        extra.push(("bogus.weight".into(), Tensor::scalar(1.0)));
        let e = load_state_dict(&b, &extra, true).unwrap_err();
        assert!(
            e.msg.contains("unexpected") && e.msg.contains("bogus.weight"),
            "{e}"
        );
        assert!(load_state_dict(&b, &extra, false).is_ok());
        assert_eq!(
            b.scale.to_vec::<f32>().unwrap(),
            vec![2.0],
            "`a`'s value again"
        );

        let mut shape = loaded.clone();
        for (n, t) in shape.iter_mut() {
            if n == "heads.0.weight" {
                *t = Tensor::zeros(&[4, 3]).unwrap();
            }
        }
        let e = load_state_dict(&b, &shape, true).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape);
        assert!(e.msg.contains("heads.0.weight"), "{e}");

        let mut dtype = loaded.clone();
        for (n, t) in dtype.iter_mut() {
            if n == "heads.0.weight" {
                *t = Tensor::zeros(&[3, 4]).unwrap().cast(DType::F16).unwrap();
            }
            if n == "scale" {
                *t = Tensor::zeros(&[1]).unwrap();
            }
        }
        let e = load_state_dict(&b, &dtype, true).unwrap_err();
        assert_eq!(e.kind, ErrorKind::DType);
        assert!(e.msg.contains("heads.0.weight"), "{e}");
        assert_eq!(b.scale.to_vec::<f32>().unwrap(), vec![2.0], "unchanged");
        assert_eq!(b.heads[0].weight.to_vec::<f32>().unwrap(), keep);

        let dup = vec![loaded[0].clone(), loaded[0].clone()];
        assert!(load_state_dict(&b, &dup, false).is_err());

        // Loading a model's own state into itself is a no-op.
        load_state_dict(&b, &get_state_dict(&b), true).unwrap();
        assert_eq!(b.heads[0].weight.to_vec::<f32>().unwrap(), keep);
    });
}

// ------------------------------------------------------------------------------------ h-conv:
// init helpers, the conv-transpose / norm / LSTM layers

/// Mean and (biased) variance of `t`'s values.
fn moments(t: &Tensor) -> (Vec<f32>, f64, f64) {
    let v = t.to_vec::<f32>().unwrap();
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    (v, mean, var)
}

/// 65536 draws fill [-b, b]: every value inside, the extremes within 0.1% of the bound, mean 0
/// and variance b²/3 within about 4 standard errors.
fn check_uniform(what: &str, t: &Tensor, b: f64) {
    let (v, mean, var) = moments(t);
    let n = v.len() as f64;
    assert!(
        v.iter().all(|&x| (x as f64).abs() <= b * (1.0 + 1e-6)),
        "{what}: a value outside ±{b}"
    );
    let (lo, hi) = v
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, c), &x| (a.min(x), c.max(x)));
    assert!(
        hi as f64 > 0.999 * b && (lo as f64) < -0.999 * b,
        "{what}: range {lo}..{hi}, bound {b}"
    );
    assert!(
        mean.abs() < 4.0 * b / (3.0 * n).sqrt(),
        "{what}: mean {mean}"
    );
    let want = b * b / 3.0;
    assert!(
        (var / want - 1.0).abs() < 0.015,
        "{what}: variance {var}, want {want}"
    );
}

#[test]
fn init_helpers_match_their_distributions() {
    Context::new().dev(Device::Interp).run(|| {
        Tensor::manual_seed(11);
        let shape = [64, 16, 8, 8]; // fan-in 1024
        let t = Tensor::kaiming_uniform(&shape, 0.01).unwrap();
        assert_eq!((t.shape(), t.dtype()), (shape.to_vec(), DType::F32));
        check_uniform("kaiming_uniform", &t, (6.0 / 1.0001 / 1024.0f64).sqrt());
        let t = Tensor::kaiming_uniform(&[256, 256], 0.0).unwrap();
        check_uniform("kaiming_uniform a=0", &t, (6.0 / 256.0f64).sqrt());
        let t = Tensor::glorot_uniform(&shape).unwrap();
        check_uniform("glorot_uniform", &t, (6.0 / (64.0 + 1024.0f64)).sqrt());
        let t = Tensor::scaled_uniform(&[256, 256]).unwrap();
        check_uniform("scaled_uniform", &t, 1.0 / 256.0);

        // Normal: standard deviation within 1.5% (the standard error is 0.28%), and the share of
        // draws beyond two deviations within 4 standard errors of 4.55%.
        let t = Tensor::kaiming_normal(&shape, 0.01).unwrap();
        let std = (2.0 / 1.0001 / 1024.0f64).sqrt();
        let (v, mean, var) = moments(&t);
        let n = v.len() as f64;
        assert!(
            mean.abs() < 4.0 * std / n.sqrt(),
            "kaiming_normal: mean {mean}"
        );
        assert!(
            (var.sqrt() / std - 1.0).abs() < 0.015,
            "kaiming_normal: std {}",
            var.sqrt()
        );
        let tail = v.iter().filter(|&&x| (x as f64).abs() > 2.0 * std).count() as f64 / n;
        let (p, se) = (0.0455, (0.0455f64 * 0.9545 / n).sqrt());
        assert!(
            (tail - p).abs() < 4.0 * se,
            "kaiming_normal: {tail} beyond 2 std"
        );

        // Two draws differ; the shape is checked.
        let a = Tensor::kaiming_normal(&[4, 4], 0.01)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let b = Tensor::kaiming_normal(&[4, 4], 0.01)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_ne!(a, b);
        // A zero-element shape is an empty tensor (PyTorch's initialisers leave one as it is).
        let empty = Tensor::kaiming_normal(&[3, 0], 0.0).unwrap();
        assert_eq!(empty.shape(), vec![3, 0]);
        assert!(empty.to_vec::<f32>().unwrap().is_empty());
        for r in [
            Tensor::glorot_uniform(&[]),
            Tensor::kaiming_uniform(&[], 0.01),
            Tensor::kaiming_uniform(&[3, 2], f64::NAN),
        ] {
            let e = r.unwrap_err();
            assert!(
                e.msg.contains("kaiming") || e.msg.contains("glorot") || e.msg.contains("[3, 0]"),
                "{e}"
            );
        }
    });
}

#[test]
fn conv_norm_and_lstm_layers() {
    Context::new().dev(Device::Interp).run(|| {
        // PyTorch's state-dict names and shapes.
        let names = |s: Vec<(String, Tensor)>| -> Vec<(String, Vec<usize>)> {
            s.into_iter().map(|(n, t)| (n, t.shape())).collect()
        };
        let ct = ConvTranspose2d::new(4, 6, (3, 2)).unwrap();
        assert_eq!(
            names(get_state_dict(&ct)),
            [
                ("weight".into(), vec![4, 6, 3, 2]),
                ("bias".into(), vec![6])
            ]
        );
        let lstm = LstmCell::new(3, 5).unwrap();
        assert_eq!(
            names(get_state_dict(&lstm)),
            [
                ("weight_ih".into(), vec![20, 3]),
                ("weight_hh".into(), vec![20, 5]),
                ("bias_ih".into(), vec![20]),
                ("bias_hh".into(), vec![20])
            ]
        );
        assert_eq!(get_parameters(&lstm).len(), 4);
        let w = lstm.weight_hh.to_vec::<f32>().unwrap();
        assert!(
            w.iter().all(|v| v.abs() <= 1.0 / 5f32.sqrt()),
            "LSTM weight bound"
        );
        assert!(lstm
            .bias_ih
            .as_ref()
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|&v| v == 0.0));
        assert_eq!(
            names(get_state_dict(&RmsNorm::new(4).unwrap())),
            [("weight".into(), vec![4])]
        );
        assert!(get_state_dict(&InstanceNorm::with(3, 1e-5, false).unwrap()).is_empty());

        // Shapes through the layers, and the state carried between LSTM steps.
        let x = Tensor::randn(&[2, 4, 5, 5]).unwrap();
        let up = ConvTranspose2d::with(
            4,
            2,
            (3, 3),
            ConvTranspose2dOpts {
                stride: (2, 2),
                padding: (1, 1),
                output_padding: (1, 1),
                ..Default::default()
            },
            true,
        )
        .unwrap();
        assert_eq!(up.forward(&x).unwrap().shape(), [2, 2, 10, 10]);
        assert_eq!(
            LayerNorm2d::new(4).unwrap().forward(&x).unwrap().shape(),
            [2, 4, 5, 5]
        );
        let seq = Tensor::randn(&[2, 3, 7]).unwrap();
        let c1 = Conv1d::with(
            3,
            6,
            3,
            Conv1dOpts {
                padding: Padding1d::Same,
                ..Default::default()
            },
            false,
        )
        .unwrap();
        assert_eq!(c1.forward(&seq).unwrap().shape(), [2, 6, 7]);
        assert_eq!(
            ConvTranspose1d::new(3, 2, 4)
                .unwrap()
                .forward(&seq)
                .unwrap()
                .shape(),
            [2, 2, 10]
        );
        let (h, c) = lstm
            .forward(&Tensor::randn(&[2, 3]).unwrap(), None)
            .unwrap();
        let (h2, _) = lstm
            .forward(&Tensor::randn(&[2, 3]).unwrap(), Some((&h, &c)))
            .unwrap();
        assert_eq!(h2.shape(), [2, 5]);

        // Errors name the layer.
        let err = |r: wgrad::Result<Tensor>, part: &str| {
            let e = r.unwrap_err();
            assert!(e.msg.contains(part), "{e}");
        };
        err(InstanceNorm::new(3).unwrap().forward(&x), "InstanceNorm");
        err(
            InstanceNorm::new(4)
                .unwrap()
                .forward(&Tensor::randn(&[2, 4]).unwrap()),
            "InstanceNorm",
        );
        err(RmsNorm::new(3).unwrap().forward(&x), "RMSNorm");
        err(LayerNorm2d::new(3).unwrap().forward(&x), "LayerNorm2d");
        err(lstm.forward(&x, None).map(|(h, _)| h), "LSTMCell");
        err(
            lstm.forward(
                &Tensor::randn(&[2, 3]).unwrap(),
                Some((&h, &h2.reshape(&[5, 2]).unwrap())),
            )
            .map(|(h, _)| h),
            "LSTMCell",
        );
        assert!(ConvTranspose2d::with(
            3,
            4,
            (2, 2),
            ConvTranspose2dOpts {
                groups: 2,
                ..Default::default()
            },
            true
        )
        .is_err());
        assert!(Conv1d::with(
            4,
            4,
            3,
            Conv1dOpts {
                padding: Padding1d::Same,
                stride: 2,
                ..Default::default()
            },
            true
        )
        .is_err());
    });
}
