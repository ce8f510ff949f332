//! Off Windows there is no kernel32.dll, dxgi.dll, d3d12.dll or DirectML.dll. The backend
//! imports only `LoadLibraryExW` and `GetProcAddress` (through the bindings); it reaches the
//! three libraries' entry points through them, and every other call through COM vtables.
//! Defining those two here makes every build flavour link (coverage builds reference them
//! even when nothing calls them): "loading" any library succeeds, and each entry point the
//! backend asks for is a stand-in that answers `E_NOTIMPL`, so the whole device sequence runs
//! and fails cleanly at its first step, which the test suite checks. Call sites need no `cfg`.

use core::ffi::c_void;
use std::ffi::CStr;

use windows_core::{GUID, HRESULT, PCSTR, PCWSTR};

use super::bindings::{
    D3D_FEATURE_LEVEL, DML_CREATE_DEVICE_FLAGS, FARPROC, HANDLE, HINSTANCE, HMODULE,
};
use super::library::{CreateDevice, CreateDmlDevice, CreateFactory};

/// "Not implemented": what every entry point answers here.
pub const E_NOTIMPL: HRESULT = HRESULT(0x8000_4001_u32 as i32);

/// The one "module" every load returns: not null, never dereferenced.
const MODULE: HMODULE = HINSTANCE(std::ptr::dangling_mut());

/// kernel32.dll's `LoadLibraryExW`: any library "loads".
// SAFETY: no other definition of `LoadLibraryExW` is linked off Windows, and the signature is
// the one the bindings import it with.
#[unsafe(no_mangle)]
pub extern "system" fn LoadLibraryExW(_name: PCWSTR, _file: HANDLE, _flags: u32) -> HMODULE {
    MODULE
}

/// kernel32.dll's `GetProcAddress`: the stand-in for each entry point the backend uses.
///
/// # Safety
/// `name` must point at a NUL-terminated string, as for the real function.
// SAFETY: no other definition of `GetProcAddress` is linked off Windows, and the signature is
// the one the bindings import it with.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn GetProcAddress(_module: HMODULE, name: PCSTR) -> FARPROC {
    // SAFETY: the caller passes a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(name.0.cast()) };
    let found: *const c_void = match name.to_bytes() {
        b"CreateDXGIFactory1" => create_factory as CreateFactory as *const c_void,
        b"D3D12CreateDevice" => create_device as CreateDevice as *const c_void,
        b"DMLCreateDevice" => create_dml_device as CreateDmlDevice as *const c_void,
        _ => return None,
    };
    // SAFETY: `found` is a non-null function pointer; FARPROC is an optional function pointer,
    // which the caller turns back into the type above before calling it.
    unsafe { std::mem::transmute::<*const c_void, FARPROC>(found) }
}

unsafe extern "system" fn create_factory(_riid: *const GUID, _out: *mut *mut c_void) -> HRESULT {
    E_NOTIMPL
}

unsafe extern "system" fn create_device(
    _adapter: *mut c_void,
    _level: D3D_FEATURE_LEVEL,
    _riid: *const GUID,
    _out: *mut *mut c_void,
) -> HRESULT {
    E_NOTIMPL
}

unsafe extern "system" fn create_dml_device(
    _device: *mut c_void,
    _flags: DML_CREATE_DEVICE_FLAGS,
    _riid: *const GUID,
    _out: *mut *mut c_void,
) -> HRESULT {
    E_NOTIMPL
}
