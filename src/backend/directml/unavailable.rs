//! Off Windows there is no dxgi.dll, d3d12.dll or directml.dll. The bindings import only
//! three functions from them (every other call goes through COM vtables); defining those three
//! here, each returning `E_NOTIMPL`, makes every build flavour link (coverage builds reference
//! them even when nothing calls them) and lets the whole device sequence run and fail cleanly
//! at its first step, which the test suite checks. Call sites need no `cfg`.

use core::ffi::c_void;

use windows_core::{GUID, HRESULT};

/// "Not implemented": what every function answers here.
pub const E_NOTIMPL: HRESULT = HRESULT(0x8000_4001_u32 as i32);

/// dxgi.dll's `CreateDXGIFactory1`.
// SAFETY: no other definition of `CreateDXGIFactory1` is linked off Windows, and the signature is
// the one the bindings import it with.
#[unsafe(no_mangle)]
pub extern "system" fn CreateDXGIFactory1(
    _riid: *const GUID,
    _factory: *mut *mut c_void,
) -> HRESULT {
    E_NOTIMPL
}

/// d3d12.dll's `D3D12CreateDevice`.
// SAFETY: no other definition of `D3D12CreateDevice` is linked off Windows, and the signature is
// the one the bindings import it with.
#[unsafe(no_mangle)]
pub extern "system" fn D3D12CreateDevice(
    _adapter: *mut c_void,
    _minimum_feature_level: i32,
    _riid: *const GUID,
    _device: *mut *mut c_void,
) -> HRESULT {
    E_NOTIMPL
}

/// directml.dll's `DMLCreateDevice`.
// SAFETY: no other definition of `DMLCreateDevice` is linked off Windows, and the signature is
// the one the bindings import it with.
#[unsafe(no_mangle)]
pub extern "system" fn DMLCreateDevice(
    _d3d12_device: *mut c_void,
    _flags: u32,
    _riid: *const GUID,
    _device: *mut *mut c_void,
) -> HRESULT {
    E_NOTIMPL
}
