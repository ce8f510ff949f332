//! dxgi.dll, d3d12.dll and DirectML.dll, loaded when the backend first asks for them, never
//! imported: a Windows without DirectML (before 10 1903, or a Server without the component)
//! must still start tjoin, run `--backend cpu`, and hear from `--backend directml` which
//! library is missing and where to get it.
//!
//! Each library is loaded with `LoadLibraryExW` and a search path that leaves out the current
//! directory and `PATH`: System32 for the two system libraries; tjoin's own folder, then
//! System32, for DirectML.dll (the redistributable goes beside the program). The libraries
//! stay loaded for the rest of the process, as the COM objects made through them run their
//! code. Off Windows, `unavailable` stands in for `LoadLibraryExW` and `GetProcAddress`.

use std::ffi::c_void;

use windows_core::{GUID, HRESULT, Interface, PCSTR, PCWSTR};

use super::bindings::*;

/// dxgi.dll's `CreateDXGIFactory1`.
pub type CreateFactory = unsafe extern "system" fn(*const GUID, *mut *mut c_void) -> HRESULT;
/// d3d12.dll's `D3D12CreateDevice`.
pub type CreateDevice = unsafe extern "system" fn(
    *mut c_void,
    D3D_FEATURE_LEVEL,
    *const GUID,
    *mut *mut c_void,
) -> HRESULT;
/// DirectML.dll's `DMLCreateDevice`.
pub type CreateDmlDevice = unsafe extern "system" fn(
    *mut c_void,
    DML_CREATE_DEVICE_FLAGS,
    *const GUID,
    *mut *mut c_void,
) -> HRESULT;

/// What `GetProcAddress` finds: a function of a signature only its documentation gives.
type Proc = unsafe extern "system" fn() -> isize;

/// The three entry points the backend needs from the libraries.
pub struct Runtime {
    create_factory: CreateFactory,
    create_device: CreateDevice,
    create_dml_device: CreateDmlDevice,
}

/// Where a library is looked for, and what to tell a user who does not have it.
struct Library {
    name: &'static str,
    search: i32,
    remedy: &'static str,
}

const DXGI: Library = Library {
    name: "dxgi.dll",
    search: LOAD_LIBRARY_SEARCH_SYSTEM32,
    remedy: "it is part of Windows; Direct3D 12 needs Windows 10 or later",
};
const D3D12: Library = Library {
    name: "d3d12.dll",
    search: LOAD_LIBRARY_SEARCH_SYSTEM32,
    remedy: "it is part of Windows 10 and later (Direct3D 12)",
};
const DIRECTML: Library = Library {
    name: "DirectML.dll",
    search: LOAD_LIBRARY_SEARCH_APPLICATION_DIR | LOAD_LIBRARY_SEARCH_SYSTEM32,
    remedy: "Windows 10 version 1903 and later ship it; elsewhere, put the DirectML.dll of the \
             Microsoft.AI.DirectML NuGet package (DirectML's redistributable, folder \
             bin/x64-win) beside tjoin.exe",
};

impl Library {
    /// Loads the library and finds `symbol` in it, or says which is missing and what to do.
    fn symbol(&self, symbol: &'static str) -> Result<Proc, String> {
        let wide: Vec<u16> = self.name.encode_utf16().chain([0]).collect();
        // SAFETY: `wide` is a NUL-terminated UTF-16 string alive for the call; no file handle
        // is passed (it must be null); the flags only choose where to look.
        let module = unsafe { LoadLibraryExW(PCWSTR(wide.as_ptr()), None, self.search as u32) };
        if module.0.is_null() {
            let why = std::io::Error::last_os_error();
            return Err(format!(
                "{} could not be loaded ({why}): {}",
                self.name, self.remedy
            ));
        }
        let name: Vec<u8> = symbol.bytes().chain([0]).collect();
        // SAFETY: `module` is a loaded library (never freed) and `name` a NUL-terminated ANSI
        // string alive for the call.
        let found = unsafe { GetProcAddress(module, PCSTR(name.as_ptr())) };
        found.ok_or_else(|| {
            format!(
                "{} has no {symbol} ({}): {}",
                self.name,
                std::io::Error::last_os_error(),
                self.remedy
            )
        })
    }
}

impl Runtime {
    /// Loads the three libraries (dxgi.dll, d3d12.dll, then DirectML.dll) and their entry
    /// points.
    pub fn load() -> Result<Runtime, String> {
        let factory = DXGI.symbol("CreateDXGIFactory1")?;
        let device = D3D12.symbol("D3D12CreateDevice")?;
        let dml = DIRECTML.symbol("DMLCreateDevice")?;
        // SAFETY: each symbol is the function its library documents under that name, with the
        // signature of the type it becomes (as in Microsoft's headers); function pointers of
        // every signature have the same size and representation.
        unsafe {
            Ok(Runtime {
                create_factory: std::mem::transmute::<Proc, CreateFactory>(factory),
                create_device: std::mem::transmute::<Proc, CreateDevice>(device),
                create_dml_device: std::mem::transmute::<Proc, CreateDmlDevice>(dml),
            })
        }
    }

    /// `CreateDXGIFactory1` for the factory interface `T`.
    pub fn create_factory<T: Interface>(&self) -> windows_core::Result<T> {
        // SAFETY: the function's own signature; it writes a `T` into `out` if it succeeds.
        created(|iid, out| unsafe { (self.create_factory)(iid, out) })
    }

    /// `D3D12CreateDevice` on `adapter` at `level` or above.
    pub fn create_device<T: Interface>(
        &self,
        adapter: &IDXGIAdapter1,
        level: D3D_FEATURE_LEVEL,
    ) -> windows_core::Result<T> {
        // SAFETY: a live adapter, borrowed for the call; the function writes a `T` into `out`
        // if it succeeds.
        created(|iid, out| unsafe { (self.create_device)(adapter.as_raw(), level, iid, out) })
    }

    /// `DMLCreateDevice` over `device`.
    pub fn create_dml_device<T: Interface>(
        &self,
        device: &ID3D12Device,
        flags: DML_CREATE_DEVICE_FLAGS,
    ) -> windows_core::Result<T> {
        // SAFETY: a live device, borrowed for the call; the function writes a `T` into `out`
        // if it succeeds.
        created(|iid, out| unsafe { (self.create_dml_device)(device.as_raw(), flags, iid, out) })
    }
}

/// The interface of type `T` that `create` (given `T`'s IID and where to write it) makes, owned,
/// or its failure.
fn created<T: Interface>(
    create: impl FnOnce(*const GUID, *mut *mut c_void) -> HRESULT,
) -> windows_core::Result<T> {
    let mut out = std::ptr::null_mut();
    create(&T::IID, &mut out).ok()?;
    if out.is_null() {
        return Err(windows_core::Error::from_hresult(E_POINTER));
    }
    // SAFETY: the function succeeded and wrote a non-null pointer to a `T` (the IID it was
    // given) whose reference it handed over: the result takes ownership of it.
    Ok(unsafe { T::from_raw(out) })
}

/// "Invalid pointer": a creation function that succeeded without writing its result.
const E_POINTER: HRESULT = HRESULT(0x8000_4003_u32 as i32);
