//! BEAM search (`Context::beam`, `BEAM=n`): tuned kernels compute what the default kernels do,
//! on every backend; a second search of the same kernel is answered by the disk cache (no
//! candidate timed); a corrupt cache file is ignored; a TinyJit capture replays the tuned
//! kernels.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

#[path = "../examples/common/model.rs"]
mod model;

use model::{train_step, Model};
use wgrad::nn::optim::Adam;
use wgrad::nn::state::get_parameters;
use wgrad::schedule::ScheduleItem;
use wgrad::search::{candidates_timed, plan};
use wgrad::{Context, Device, Tensor, TinyJit};

/// Every test here shares one cache directory and a short search budget (both are read from
/// the environment, once).
fn setup() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("wgrad-beam-test-{}", std::process::id()));
    std::env::set_var("WGRAD_CACHE_DIR", &dir);
    std::env::set_var("BEAM_BUDGET_MS", "400");
    dir
}

fn data(shape: &[usize], seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| {
            (((i as u32).wrapping_mul(2654435761).wrapping_add(seed)) % 1000) as f32 / 500.0 - 1.0
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-4 + 1e-3 * y.abs(),
            "{what}[{i}]: {x} tuned vs {y} default"
        );
    }
}

#[test]
fn a_tuned_matmul_equals_the_default_one() {
    setup();
    for dev in common::devices() {
        let (a, b) = Context::new()
            .dev(dev)
            .run(|| (data(&[48, 64], 1), data(&[64, 40], 2)));
        let want = Context::new()
            .dev(dev)
            .run(|| a.matmul(&b).unwrap().to_vec::<f32>().unwrap());
        let got = Context::new()
            .dev(dev)
            .beam(2)
            .run(|| a.matmul(&b).unwrap().to_vec::<f32>().unwrap());
        close(&got, &want, &format!("{dev} matmul"));
    }
}

#[test]
fn a_second_search_hits_the_cache_and_a_corrupt_entry_is_ignored() {
    let dir = setup();
    let dev = Device::Interp;
    let (x, w) = Context::new()
        .dev(dev)
        .run(|| (data(&[16, 300], 3), data(&[300, 24], 4)));
    let t = x.matmul(&w).unwrap().relu().unwrap().sum(1, false).unwrap();
    let items = t.schedule().unwrap();
    let asts: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            ScheduleItem::Kernel { ast, .. } => Some(ast),
            _ => None,
        })
        .collect();
    let target = wgrad::realize::target(dev);
    let first: Vec<_> = asts
        .iter()
        .map(|a| plan(dev, a, &target, 3).unwrap())
        .collect();
    let before = candidates_timed();
    let again: Vec<_> = asts
        .iter()
        .map(|a| plan(dev, a, &target, 3).unwrap())
        .collect();
    assert_eq!(
        candidates_timed(),
        before,
        "the second search timed candidates"
    );
    assert_eq!(first, again, "the cache returns what was searched");
    // Corrupt every BEAM cache file: the next search ignores them (with a warning) and
    // searches. (Only the BEAM files: the heuristic's plans, `plans-*.json`, belong to another
    // test running beside this one in the same directory.)
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let beam = p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("beam-");
        if beam && p.extension().is_some_and(|x| x == "json") {
            std::fs::write(&p, b"{ not json").unwrap();
        }
    }
    let before = candidates_timed();
    let third: Vec<_> = asts
        .iter()
        .map(|a| plan(dev, a, &target, 3).unwrap())
        .collect();
    assert!(candidates_timed() > before, "corrupt entries were trusted");
    for (a, p) in asts.iter().zip(&third) {
        assert!(wgrad::codegen::compile_plan(a, p).is_ok());
    }
}

/// The tutorial's training step at batch 16, tuned, inside a TinyJit: the same losses as the
/// default kernels.
#[test]
fn the_tutorial_step_tuned_and_jitted_equals_the_default() {
    setup();
    // The interpreter runs tuned kernels in the tests above; here the compiled backends, but
    // WASM: natively an interpreter of WebAssembly times each candidate of a whole training
    // step (7 minutes); it runs the tuned matmul above and the untuned step in tests/mnist.rs.
    for dev in common::devices()
        .into_iter()
        .filter(|&d| d != Device::Interp && d.name() != "WASM")
    {
        let run = |beam: u32| -> Vec<f32> {
            Context::new().dev(dev).beam(beam).run(|| {
                Tensor::manual_seed(11);
                let model = Model::new().unwrap();
                let mut opt = Adam::new(get_parameters(&model)).unwrap();
                let x = Tensor::rand(&[64, 1, 28, 28]).unwrap().realize().unwrap();
                let y = Tensor::randint(&[64], 0, 10).unwrap().realize().unwrap();
                let mut step = TinyJit::new(|_: &[Tensor]| {
                    Ok(vec![train_step(&model, &mut opt, &x, &y, 16)?])
                });
                (0..4)
                    .map(|_| step.call(&[]).unwrap()[0].item::<f32>().unwrap())
                    .collect()
            })
        };
        let want = run(0);
        let got = run(2);
        close(&got, &want, &format!("{dev} losses"));
    }
}

/// The heuristic's plans are remembered on disk (so a second process plans nothing): realizing
/// a kernel stores its plan, equal to what the heuristic makes; a corrupt file is ignored (with
/// a warning) and a plan that no longer applies to its kernel is replaced, the results staying
/// right throughout.
#[test]
fn heuristic_plans_are_remembered_and_bad_entries_replaced() {
    let dir = setup();
    let dev = Device::Cpu;
    if !common::usable(dev) {
        return;
    }
    let build = || {
        let x = data(&[12, 345], 7);
        let w = data(&[345, 20], 8);
        x.matmul(&w).unwrap().tanh().unwrap().sum(1, false).unwrap()
    };
    let want: Vec<f32> = Context::new()
        .dev(Device::Interp)
        .run(|| build().to_vec().unwrap());
    let run = || {
        Context::new().dev(dev).run(|| {
            let t = build();
            let items = t.schedule().unwrap();
            let ast = match items.last() {
                Some(ScheduleItem::Kernel { ast, .. }) => ast.clone(),
                _ => panic!("no kernel"),
            };
            wgrad::realize::forget_programs();
            let got: Vec<f32> = t.to_vec().unwrap();
            close(&got, &want, "realized with the remembered plan");
            ast
        })
    };
    let target = wgrad::realize::target(dev);
    let ast = run();
    let remembered = wgrad::search::cached_heuristic_plan(dev, &ast, &target);
    assert_eq!(
        remembered,
        Some(wgrad::codegen::default_plan(&ast, &target)),
        "the realized kernel's plan is remembered"
    );
    let plan_files = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("plans-")
            })
            .collect()
    };
    assert!(
        !plan_files().is_empty(),
        "no plan file in {}",
        dir.display()
    );
    // A plan that does not apply (a split of an axis the kernel does not have): replaced.
    for p in plan_files() {
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["plan"] =
            serde_json::json!({ "split": [99, 2], "first": v["plan"], "second": v["plan"] });
        std::fs::write(&p, v.to_string()).unwrap();
    }
    run();
    assert_eq!(
        wgrad::search::cached_heuristic_plan(dev, &ast, &target),
        Some(wgrad::codegen::default_plan(&ast, &target)),
        "a plan that no longer applies is replaced"
    );
    // Corrupt files: ignored.
    for p in plan_files() {
        std::fs::write(&p, b"{ not json").unwrap();
    }
    assert_eq!(
        wgrad::search::cached_heuristic_plan(dev, &ast, &target),
        None
    );
    run();
}
