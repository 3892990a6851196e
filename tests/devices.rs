//! Moving tensors between devices, and mixing devices by mistake.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

use wgrad::{Context, Device, ErrorKind, Tensor};

#[test]
fn to_moves_realized_and_lazy_tensors() {
    let a = Context::new()
        .dev(Device::Interp)
        .run(|| Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap());
    let b = a.to(Device::Cpu).unwrap();
    assert_eq!(b.device(), Device::Cpu);
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    let lazy = a
        .mul(2.0)
        .unwrap()
        .flip(&[0])
        .unwrap()
        .to(Device::Cpu)
        .unwrap();
    assert_eq!(
        lazy.add(1.0).unwrap().to_vec::<f32>().unwrap(),
        vec![7.0, 5.0, 3.0]
    );
}

#[test]
fn mixing_devices_is_an_error() {
    let a = Context::new()
        .dev(Device::Interp)
        .run(|| Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap());
    let b = Context::new()
        .dev(Device::Cpu)
        .run(|| Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap());
    let e = a.add(&b).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Device);
    assert!(e.msg.contains("INTERP") && e.msg.contains("CPU"), "{e}");
}
