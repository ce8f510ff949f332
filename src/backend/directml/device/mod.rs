//! The DirectML runtime, after Microsoft's HelloDirectML sample: a Direct3D 12 device on the
//! chosen adapter, a DirectML device over it, and for each dispatch of a plan the Join
//! operator (compiled and initialized once per shape), its binding table, the upload of its
//! inputs through a staging buffer, the dispatch, and the readback of its output through
//! another. Every call into the bindings is FFI: each `unsafe` block says why it is sound.
//!
//! The staging buffers hold `SLAB` bytes each, and the device's own buffers at most the
//! adapter's budget (`plan::buffer_budget`), so memory stays bounded however large the job.

use std::collections::HashMap;
use std::ffi::c_void;
use std::mem::{ManuallyDrop, size_of_val};

use windows_core::{HRESULT, Interface};

use super::Adapter;
use super::bindings::*;
use super::library::Runtime;
use super::plan::{
    self, Dispatch, DmlPlan, FeatureLevel, KNOWN_LEVELS, SLAB, ShapeKey, TensorDesc,
};
use crate::dtype::swap_in_place;
use crate::error::{Error, Result};
use crate::format::Sink;
use crate::plan::JoinPlan;
use crate::sys::Region;
use staging::tensor_descs;

type Outcome<T> = std::result::Result<T, String>;

/// An open device and everything a join reuses on it.
pub struct Gpu {
    /// The adapter's name and how it was chosen, for messages.
    name: String,
    device: ID3D12Device,
    queue: ID3D12CommandQueue,
    allocator: ID3D12CommandAllocator,
    list: ID3D12GraphicsCommandList,
    fence: ID3D12Fence,
    fence_value: u64,
    dml: IDMLDevice,
    recorder: IDMLCommandRecorder,
    upload: ID3D12Resource,
    /// The upload buffer, mapped for writing for as long as it lives.
    upload_bytes: *mut u8,
    readback: ID3D12Resource,
    /// The input buffer: in the copy-destination state when new, else between dispatches in
    /// the unordered-access state, as is the output buffer always.
    input: Option<(ID3D12Resource, u64)>,
    output: Option<(ID3D12Resource, u64)>,
    temporary: Option<(ID3D12Resource, u64)>,
    heap: Option<(ID3D12DescriptorHeap, u32)>,
    operators: HashMap<ShapeKey, Operator>,
    /// Compiled Splits, apart from the Joins: a Split's key is its inverse Join's.
    split_operators: HashMap<ShapeKey, Operator>,
}

/// A compiled and initialized Join or Split.
#[derive(Clone)]
struct Operator {
    compiled: IDMLCompiledOperator,
    properties: DML_BINDING_PROPERTIES,
    persistent: Option<(ID3D12Resource, u64)>,
}

/// "What failed, and its HRESULT".
fn failed(what: &str, error: windows_core::Error) -> String {
    format!("{what} failed: {}", hresult_text(error.code()))
}

/// An HRESULT as `NAME (0x........)` for the ones a user may meet here.
pub fn hresult_text(code: HRESULT) -> String {
    let value = code.0 as u32;
    let name = match value {
        0x8000_4001 => "E_NOTIMPL",
        0x8000_4005 => "E_FAIL",
        0x8007_0057 => "E_INVALIDARG",
        0x8007_000E => "E_OUTOFMEMORY",
        0x8007_007E => "the DLL was not found",
        0x887A_0002 => "DXGI_ERROR_NOT_FOUND",
        0x887A_0004 => "DXGI_ERROR_UNSUPPORTED",
        0x887A_0005 => "DXGI_ERROR_DEVICE_REMOVED",
        0x887A_0006 => "DXGI_ERROR_DEVICE_HUNG",
        0x887A_0007 => "DXGI_ERROR_DEVICE_RESET",
        _ => "",
    };
    if name.is_empty() {
        format!("0x{value:08X}")
    } else {
        format!("{name} (0x{value:08X})")
    }
}

/// The adapter's name, dedicated video memory, and whether it is a software adapter.
fn describe(adapter: &IDXGIAdapter1) -> Outcome<(String, u64, bool)> {
    // SAFETY: DXGI_ADAPTER_DESC1 is plain data (integers and a UTF-16 array): all zeros is a
    // valid value, and GetDesc1 writes only inside it.
    let mut desc: DXGI_ADAPTER_DESC1 = unsafe { std::mem::zeroed() };
    // SAFETY: `desc` is a valid, writable DXGI_ADAPTER_DESC1 for the duration of the call.
    unsafe { adapter.GetDesc1(&mut desc) }
        .ok()
        .map_err(|e| failed("IDXGIAdapter1::GetDesc1", e))?;
    let end = desc
        .Description
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(desc.Description.len());
    let name = String::from_utf16_lossy(&desc.Description[..end]);
    let software = desc.Flags & (DXGI_ADAPTER_FLAG_SOFTWARE as u32) != 0;
    Ok((name, desc.DedicatedVideoMemory as u64, software))
}

fn create_device(runtime: &Runtime, adapter: &IDXGIAdapter1) -> Outcome<ID3D12Device> {
    runtime
        .create_device(adapter, D3D_FEATURE_LEVEL_11_0)
        .map_err(|e| failed("D3D12CreateDevice", e))
}

fn enum_adapter(factory: &IDXGIFactory4, index: u32) -> windows_core::Result<IDXGIAdapter1> {
    // SAFETY: a live factory; the binding returns an owned adapter or the HRESULT.
    unsafe { factory.EnumAdapters1(index) }
}

/// The adapter `choice` names and a Direct3D 12 device on it.
fn pick(
    runtime: &Runtime,
    factory: &IDXGIFactory4,
    choice: Adapter,
) -> Outcome<(IDXGIAdapter1, ID3D12Device)> {
    let adapter = match choice {
        Adapter::Default => return first_hardware(runtime, factory),
        // SAFETY: a live factory; the binding passes IDXGIAdapter1's IID.
        Adapter::Warp => unsafe { factory.EnumWarpAdapter() }
            .map_err(|e| failed("IDXGIFactory4::EnumWarpAdapter", e))?,
        Adapter::Index(index) => enum_adapter(factory, index).map_err(|e| {
            if e.code() == DXGI_ERROR_NOT_FOUND {
                let count = (0..)
                    .take_while(|&i| enum_adapter(factory, i).is_ok())
                    .count();
                format!(
                    "there is no adapter {index}: DXGI lists {count}, from 0; \
                     --dml-adapter takes one of those, default or warp"
                )
            } else {
                failed("IDXGIFactory1::EnumAdapters1", e)
            }
        })?,
    };
    let device = create_device(runtime, &adapter)?;
    Ok((adapter, device))
}

/// The first hardware adapter in DXGI's order that runs Direct3D 12, and a device on it.
fn first_hardware(
    runtime: &Runtime,
    factory: &IDXGIFactory4,
) -> Outcome<(IDXGIAdapter1, ID3D12Device)> {
    let mut last = "DXGI lists no adapter".to_string();
    for index in 0.. {
        let adapter = match enum_adapter(factory, index) {
            Ok(adapter) => adapter,
            Err(e) if e.code() == DXGI_ERROR_NOT_FOUND => break,
            Err(e) => return Err(failed("IDXGIFactory1::EnumAdapters1", e)),
        };
        let (name, _, software) = describe(&adapter)?;
        if software {
            continue;
        }
        match create_device(runtime, &adapter) {
            Ok(device) => return Ok((adapter, device)),
            Err(why) => last = format!("adapter {index} ({name}): {why}"),
        }
    }
    Err(format!(
        "no hardware adapter runs Direct3D 12 ({last}); --dml-adapter warp runs on \
         Windows' software adapter"
    ))
}

/// Asks the device about `feature`, with `query` in and `data` out; false when it does not
/// answer (an older DirectML, or a feature it does not know).
///
/// # Safety
/// `Q` and `D` must be the query and data structures DirectML documents for `feature`
/// (plain data, valid whatever DirectML writes into `data`).
unsafe fn check_feature<Q, D>(
    dml: &IDMLDevice,
    feature: DML_FEATURE,
    query: &Q,
    data: &mut D,
) -> bool {
    // SAFETY: `query` and `data` are alive for the call and the sizes passed are theirs, so
    // DirectML reads and writes only inside them; the caller vouches for their types.
    unsafe {
        dml.CheckFeatureSupport(
            feature,
            size_of_val(query) as u32,
            Some(query as *const Q as *const c_void),
            size_of_val(data) as u32,
            data as *mut D as *mut c_void,
        )
    }
    .is_ok()
}

/// The highest feature level the device reports among those tjoin knows. DirectML before
/// 1.1 has no such query, and older versions may refuse levels they do not know: ask again
/// with fewer, and assume 1.0 if none is answered.
fn feature_level(dml: &IDMLDevice) -> FeatureLevel {
    for count in (1..=KNOWN_LEVELS.len()).rev() {
        let levels: Vec<DML_FEATURE_LEVEL> =
            KNOWN_LEVELS[..count].iter().map(|l| l.code()).collect();
        let query = DML_FEATURE_QUERY_FEATURE_LEVELS {
            RequestedFeatureLevelCount: count as u32,
            RequestedFeatureLevels: levels.as_ptr(),
        };
        let mut data = DML_FEATURE_DATA_FEATURE_LEVELS::default();
        // SAFETY: the FEATURE_LEVELS query and data structures; `query` points at `levels`,
        // alive for the call.
        if unsafe { check_feature(dml, DML_FEATURE_FEATURE_LEVELS, &query, &mut data) } {
            return FeatureLevel::from_code(data.MaxSupportedFeatureLevel);
        }
    }
    FeatureLevel::V1_0
}

fn supports_float64(dml: &IDMLDevice) -> bool {
    let query = DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT {
        DataType: DML_TENSOR_DATA_TYPE_FLOAT64,
    };
    let mut data = DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT::default();
    // SAFETY: the TENSOR_DATA_TYPE_SUPPORT query and data structures.
    let answered =
        unsafe { check_feature(dml, DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT, &query, &mut data) };
    answered && data.IsSupported.as_bool()
}

/// A committed buffer of `size` bytes on a heap of type `heap`.
fn buffer(
    device: &ID3D12Device,
    heap: D3D12_HEAP_TYPE,
    size: u64,
    flags: D3D12_RESOURCE_FLAGS,
    state: D3D12_RESOURCE_STATES,
) -> Outcome<ID3D12Resource> {
    let properties = D3D12_HEAP_PROPERTIES {
        Type: heap,
        ..Default::default()
    };
    let desc = D3D12_RESOURCE_DESC {
        Dimension: D3D12_RESOURCE_DIMENSION_BUFFER,
        Alignment: 0,
        Width: size.max(4),
        Height: 1,
        DepthOrArraySize: 1,
        MipLevels: 1,
        Format: DXGI_FORMAT_UNKNOWN,
        SampleDesc: DXGI_SAMPLE_DESC {
            Count: 1,
            Quality: 0,
        },
        Layout: D3D12_TEXTURE_LAYOUT_ROW_MAJOR,
        Flags: flags,
    };
    let mut resource: Option<ID3D12Resource> = None;
    // SAFETY: both descriptions are alive for the call; `resource` receives an owned reference.
    unsafe {
        device.CreateCommittedResource(
            &properties,
            D3D12_HEAP_FLAG_NONE,
            &desc,
            state,
            None,
            &mut resource,
        )
    }
    .map_err(|e| failed(&format!("creating a buffer of {size} bytes"), e))?;
    resource.ok_or_else(|| "CreateCommittedResource returned no buffer".to_string())
}

/// A borrowed interface pointer in a field DirectML or Direct3D reads during one call.
///
/// # Safety
/// The result must not outlive `interface`, and must never be dropped as an owned reference
/// (it holds no reference count of its own; `ManuallyDrop` keeps it from being released).
unsafe fn borrowed<T: Interface, U: Interface>(interface: &T) -> ManuallyDrop<Option<U>> {
    // SAFETY: T is a COM interface deriving from U (the callers pass an interface and one of
    // its bases), so its pointer is a valid U pointer; `Option<U>` has a pointer's layout.
    unsafe { std::mem::transmute_copy(interface) }
}

fn transition(
    resource: &ID3D12Resource,
    before: D3D12_RESOURCE_STATES,
    after: D3D12_RESOURCE_STATES,
) -> D3D12_RESOURCE_BARRIER {
    D3D12_RESOURCE_BARRIER {
        Type: D3D12_RESOURCE_BARRIER_TYPE_TRANSITION,
        Flags: D3D12_RESOURCE_BARRIER_FLAG_NONE,
        Anonymous: D3D12_RESOURCE_BARRIER_0 {
            Transition: ManuallyDrop::new(D3D12_RESOURCE_TRANSITION_BARRIER {
                // SAFETY: the barrier is recorded while `resource` is alive, and dropped
                // without releasing it.
                pResource: unsafe { borrowed(resource) },
                Subresource: D3D12_RESOURCE_BARRIER_ALL_SUBRESOURCES,
                StateBefore: before,
                StateAfter: after,
            }),
        },
    }
}

fn buffer_binding(resource: &ID3D12Resource, offset: u64, size: u64) -> DML_BUFFER_BINDING {
    DML_BUFFER_BINDING {
        // SAFETY: bindings are passed to DirectML while `resource` is alive, never released.
        Buffer: unsafe { borrowed(resource) },
        Offset: offset,
        SizeInBytes: size,
    }
}

fn binding_desc(binding: &DML_BUFFER_BINDING) -> DML_BINDING_DESC {
    DML_BINDING_DESC {
        Type: DML_BINDING_TYPE_BUFFER,
        Desc: binding as *const _ as *const c_void,
    }
}

/// A `DML_BUFFER_TENSOR_DESC` pointing into `desc`, which must outlive it.
fn buffer_tensor_desc(desc: &TensorDesc) -> DML_BUFFER_TENSOR_DESC {
    DML_BUFFER_TENSOR_DESC {
        DataType: desc.data_type.code(),
        Flags: DML_TENSOR_FLAG_NONE,
        DimensionCount: desc.sizes.len() as u32,
        Sizes: desc.sizes.as_ptr(),
        // Packed.
        Strides: std::ptr::null(),
        TotalTensorSizeInBytes: desc.total_bytes,
        GuaranteedBaseOffsetAlignment: plan::BINDING_ALIGNMENT as u32,
    }
}

impl Gpu {
    /// Steps 1 to 4 of the sequence in `docs/design.md` ("The DirectML backend"), through the
    /// entry points `runtime` loaded: device, queue, allocator, list, fence, DirectML device,
    /// feature level; and the two staging buffers. Also what planning needs to know.
    pub fn open(runtime: &Runtime, choice: Adapter) -> Outcome<(Gpu, plan::Device)> {
        let factory: IDXGIFactory4 = runtime
            .create_factory()
            .map_err(|e| failed("CreateDXGIFactory1", e))?;
        let (adapter, device) = pick(runtime, &factory, choice)?;
        let (name, memory, software) = describe(&adapter)?;
        let queue_desc = D3D12_COMMAND_QUEUE_DESC {
            Type: D3D12_COMMAND_LIST_TYPE_DIRECT,
            ..Default::default()
        };
        // SAFETY (this block): calls on a live device with descriptions alive for each call;
        // every result is an owned reference or an HRESULT.
        let (queue, allocator, list, fence) = unsafe {
            let queue: ID3D12CommandQueue = device
                .CreateCommandQueue(&queue_desc)
                .map_err(|e| failed("ID3D12Device::CreateCommandQueue", e))?;
            let allocator: ID3D12CommandAllocator = device
                .CreateCommandAllocator(D3D12_COMMAND_LIST_TYPE_DIRECT)
                .map_err(|e| failed("ID3D12Device::CreateCommandAllocator", e))?;
            let list: ID3D12GraphicsCommandList = device
                .CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_DIRECT, &allocator, None)
                .map_err(|e| failed("ID3D12Device::CreateCommandList", e))?;
            let fence: ID3D12Fence = device
                .CreateFence(0, D3D12_FENCE_FLAG_NONE)
                .map_err(|e| failed("ID3D12Device::CreateFence", e))?;
            (queue, allocator, list, fence)
        };
        // DMLCreateDevice (not DMLCreateDevice1) exists in every DirectML version.
        let dml: IDMLDevice = runtime
            .create_dml_device(&device, DML_CREATE_DEVICE_FLAG_NONE)
            .map_err(|e| failed("DMLCreateDevice", e))?;
        // SAFETY: a live DirectML device; the result is owned.
        let recorder: IDMLCommandRecorder = unsafe { dml.CreateCommandRecorder() }
            .map_err(|e| failed("IDMLDevice::CreateCommandRecorder", e))?;
        let capabilities = plan::Device {
            level: feature_level(&dml),
            float64: supports_float64(&dml),
            max_buffer: plan::capped_budget(
                plan::buffer_budget(memory, software),
                std::env::var(plan::BUDGET_VARIABLE).ok().as_deref(),
            )?,
        };
        let upload = buffer(
            &device,
            D3D12_HEAP_TYPE_UPLOAD,
            SLAB,
            D3D12_RESOURCE_FLAG_NONE,
            D3D12_RESOURCE_STATE_GENERIC_READ,
        )?;
        let readback = buffer(
            &device,
            D3D12_HEAP_TYPE_READBACK,
            SLAB,
            D3D12_RESOURCE_FLAG_NONE,
            D3D12_RESOURCE_STATE_COPY_DEST,
        )?;
        let mut mapped: *mut c_void = std::ptr::null_mut();
        let nothing_read = D3D12_RANGE { Begin: 0, End: 0 };
        // SAFETY: upload heaps may stay mapped for their whole life; the CPU only writes.
        unsafe { upload.Map(0, Some(&nothing_read), &mut mapped) }
            .ok()
            .map_err(|e| failed("mapping the upload buffer", e))?;
        let label = match choice {
            Adapter::Default => format!("{name} (the default adapter)"),
            Adapter::Warp => format!("{name} (WARP)"),
            Adapter::Index(index) => format!("{name} (adapter {index})"),
        };
        let gpu = Gpu {
            name: label,
            device,
            queue,
            allocator,
            list,
            fence,
            fence_value: 0,
            dml,
            recorder,
            upload,
            upload_bytes: mapped.cast(),
            readback,
            input: None,
            output: None,
            temporary: None,
            heap: None,
            operators: HashMap::new(),
            split_operators: HashMap::new(),
        };
        Ok((gpu, capabilities))
    }

    /// The adapter's name and how it was chosen, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Closes the command list, runs it, waits for the fence, and resets list and allocator.
    fn submit(&mut self) -> Outcome<()> {
        self.fence_value += 1;
        let value = self.fence_value;
        // SAFETY (this block): calls on live objects; the list holds only commands on live
        // resources; a null event handle makes SetEventOnCompletion wait until the fence
        // reaches `value`, after which the allocator's memory is no longer in use.
        unsafe {
            self.list
                .Close()
                .ok()
                .map_err(|e| failed("closing the command list", e))?;
            let list: ID3D12CommandList = (*self.list).clone();
            self.queue.ExecuteCommandLists(&[Some(list)]);
            self.queue
                .Signal(&self.fence, value)
                .ok()
                .map_err(|e| failed("ID3D12CommandQueue::Signal", e))?;
            if self.fence.GetCompletedValue() < value {
                self.fence
                    .SetEventOnCompletion(value, HANDLE(std::ptr::null_mut()))
                    .ok()
                    .map_err(|e| failed("waiting for the GPU", e))?;
            }
            self.allocator
                .Reset()
                .ok()
                .map_err(|e| failed("resetting the allocator", e))?;
            self.list
                .Reset(&self.allocator, None)
                .ok()
                .map_err(|e| failed("resetting the command list", e))?;
        }
        // SAFETY: a live device; reports whether it was lost while running the list.
        let removed = unsafe { self.device.GetDeviceRemovedReason() };
        if removed.is_err() {
            return Err(format!("the device was removed: {}", hresult_text(removed)));
        }
        Ok(())
    }

    /// The buffer in `slot`, of at least `size` bytes, made anew in `state` when the old one
    /// is smaller; and whether it was.
    fn ensure(
        device: &ID3D12Device,
        slot: &mut Option<(ID3D12Resource, u64)>,
        size: u64,
        state: D3D12_RESOURCE_STATES,
    ) -> Outcome<(ID3D12Resource, bool)> {
        if let Some((buffer, have)) = slot
            && *have >= size
        {
            return Ok((buffer.clone(), false));
        }
        let made = buffer(
            device,
            D3D12_HEAP_TYPE_DEFAULT,
            size,
            D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS,
            state,
        )?;
        *slot = Some((made.clone(), size));
        Ok((made, true))
    }

    /// A shader-visible descriptor heap with at least `count` descriptors.
    fn heap(&mut self, count: u32) -> Outcome<ID3D12DescriptorHeap> {
        if let Some((heap, have)) = &self.heap
            && *have >= count
        {
            return Ok(heap.clone());
        }
        let desc = D3D12_DESCRIPTOR_HEAP_DESC {
            Type: D3D12_DESCRIPTOR_HEAP_TYPE_CBV_SRV_UAV,
            NumDescriptors: count,
            Flags: D3D12_DESCRIPTOR_HEAP_FLAG_SHADER_VISIBLE,
            NodeMask: 0,
        };
        // SAFETY: a live device and a description alive for the call.
        let heap: ID3D12DescriptorHeap = unsafe { self.device.CreateDescriptorHeap(&desc) }
            .map_err(|e| failed("ID3D12Device::CreateDescriptorHeap", e))?;
        self.heap = Some((heap.clone(), count));
        Ok(heap)
    }

    /// A binding table for `dispatchable` over `count` descriptors (at least one) of the
    /// descriptor heap, which is also set on the command list.
    fn binding_table(
        &mut self,
        dispatchable: &IDMLDispatchable,
        count: u32,
    ) -> Outcome<IDMLBindingTable> {
        let count = count.max(1);
        let heap = self.heap(count)?;
        // SAFETY (this block): live heap, list and device; the table description borrows
        // `dispatchable` (alive for the call, never released through it).
        unsafe {
            let desc = DML_BINDING_TABLE_DESC {
                Dispatchable: borrowed(dispatchable),
                CPUDescriptorHandle: heap.GetCPUDescriptorHandleForHeapStart(),
                GPUDescriptorHandle: heap.GetGPUDescriptorHandleForHeapStart(),
                SizeInDescriptors: count,
            };
            self.list.SetDescriptorHeaps(&[Some(heap.clone())]);
            self.dml
                .CreateBindingTable(Some(&desc))
                .map_err(|e| failed("IDMLDevice::CreateBindingTable", e))
        }
    }

    /// Steps 5 to 10: the Join of this dispatch's shapes, created, compiled and initialized
    /// the first time it is met.
    fn operator(&mut self, dispatch: &Dispatch) -> Outcome<()> {
        let key = dispatch.shape_key();
        if self.operators.contains_key(&key) {
            return Ok(());
        }
        let inputs: Vec<DML_BUFFER_TENSOR_DESC> = dispatch
            .inputs
            .iter()
            .map(|b| buffer_tensor_desc(&b.desc))
            .collect();
        let input_descs = tensor_descs(&inputs);
        let output = buffer_tensor_desc(&dispatch.output);
        let output_desc = tensor_descs(std::slice::from_ref(&output));
        let join = DML_JOIN_OPERATOR_DESC {
            InputCount: input_descs.len() as u32,
            InputTensors: input_descs.as_ptr(),
            OutputTensor: &output_desc[0],
            Axis: dispatch.axis,
        };
        let desc = DML_OPERATOR_DESC {
            Type: DML_OPERATOR_JOIN,
            Desc: &join as *const _ as *const c_void,
        };
        let operator = self.compile(&desc, "Join")?;
        self.operators.insert(key, operator);
        Ok(())
    }

    /// Steps 6 to 10 for the operator `desc` describes (`what`, for messages): created,
    /// compiled, initialized.
    fn compile(&mut self, desc: &DML_OPERATOR_DESC, what: &str) -> Outcome<Operator> {
        let mut created: Option<IDMLOperator> = None;
        let mut compiled: Option<IDMLCompiledOperator> = None;
        // SAFETY: the caller keeps `desc` and everything it points to alive for these calls;
        // results are owned references.
        unsafe {
            self.dml
                .CreateOperator(desc, &mut created)
                .map_err(|e| failed(&format!("IDMLDevice::CreateOperator ({what})"), e))?;
            let created = created.ok_or("CreateOperator returned no operator")?;
            self.dml
                .CompileOperator(&created, DML_EXECUTION_FLAG_NONE, &mut compiled)
                .map_err(|e| failed("IDMLDevice::CompileOperator", e))?;
        }
        let compiled = compiled.ok_or("CompileOperator returned no operator")?;
        // SAFETY: a live device and compiled operator; the result is owned.
        let initializer: IDMLOperatorInitializer = unsafe {
            self.dml
                .CreateOperatorInitializer(Some(&[Some(compiled.clone())]))
        }
        .map_err(|e| failed("IDMLDevice::CreateOperatorInitializer", e))?;
        // SAFETY: live dispatchables.
        let (init, exec) = unsafe {
            (
                initializer.GetBindingProperties(),
                compiled.GetBindingProperties(),
            )
        };
        let temporary = init.TemporaryResourceSize.max(exec.TemporaryResourceSize);
        if temporary > 0 {
            Gpu::ensure(
                &self.device,
                &mut self.temporary,
                temporary,
                D3D12_RESOURCE_STATE_COMMON,
            )?;
        }
        let mut persistent = None;
        if exec.PersistentResourceSize > 0 {
            Gpu::ensure(
                &self.device,
                &mut persistent,
                exec.PersistentResourceSize,
                D3D12_RESOURCE_STATE_COMMON,
            )?;
        }
        let count = init
            .RequiredDescriptorCount
            .max(exec.RequiredDescriptorCount);
        let table = self.binding_table(&initializer, count)?;
        // SAFETY (this block): the bindings borrow live buffers for the calls that read them.
        unsafe {
            if init.TemporaryResourceSize > 0
                && let Some((buffer, size)) = &self.temporary
            {
                let binding = buffer_binding(buffer, 0, *size);
                table.BindTemporaryResource(Some(&binding_desc(&binding)));
            }
            if let Some((buffer, size)) = &persistent {
                let binding = buffer_binding(buffer, 0, *size);
                table.BindOutputs(Some(&[binding_desc(&binding)]));
            }
            self.recorder
                .RecordDispatch(&self.list, &initializer, &table);
        }
        self.submit()?;
        Ok(Operator {
            compiled,
            properties: exec,
            persistent,
        })
    }

    /// A failure of the device, named, with the way around it.
    fn device_error(&self, why: String) -> Error {
        Error::Device {
            reason: format!("DirectML on {}: {why}", self.name),
            hint: "--backend cpu writes the same bytes without the device".to_string(),
        }
    }

    /// Steps 11 to 14 for one dispatch of `plan`, `job`'s DirectML plan: upload from
    /// `regions` (the inputs' data, mapped), bind, dispatch, read back to `out`.
    pub fn dispatch(
        &mut self,
        plan: &DmlPlan,
        job: &JoinPlan,
        dispatch: &Dispatch,
        regions: &[Region],
        out: &mut dyn Sink,
    ) -> Result<()> {
        self.operator(dispatch)
            .map_err(|why| self.device_error(why))?;
        self.upload_inputs(plan, job, dispatch, regions)
            .map_err(|why| self.device_error(why))?;
        self.run(dispatch).map_err(|why| self.device_error(why))?;
        self.read_back(plan, dispatch, out)
    }

    /// Copies every input tensor of `dispatch` into the input buffer, a slab at a time,
    /// swapping bytes on the way where an input needs it.
    fn upload_inputs(
        &mut self,
        plan: &DmlPlan,
        job: &JoinPlan,
        dispatch: &Dispatch,
        regions: &[Region],
    ) -> Outcome<()> {
        let input = self.input_to_fill(dispatch.input_buffer_bytes)?;
        let itemsize = job.dtype.itemsize() as usize;
        let mut staged = 0u64;
        for bound in &dispatch.inputs {
            let region = &regions[bound.input];
            let swaps = &job.inputs[bound.input].swaps;
            for slab in plan.slabs(bound.source.clone()) {
                let len = slab.end - slab.start;
                if staged + len > SLAB {
                    self.submit()?;
                    staged = 0;
                }
                let bytes = &region.bytes()[slab.start as usize..slab.end as usize];
                // SAFETY: the upload buffer is mapped for SLAB bytes and `staged + len <= SLAB`;
                // the GPU reads it only in submitted copies, all of which have completed
                // (`submit` waits) before these bytes are overwritten.
                let staging = unsafe {
                    std::slice::from_raw_parts_mut(
                        self.upload_bytes.add(staged as usize),
                        len as usize,
                    )
                };
                staging.copy_from_slice(bytes);
                swap_in_place(staging, itemsize, swaps);
                let at = bound.offset + (slab.start - bound.source.start);
                // SAFETY: records a copy between live buffers, within both.
                unsafe {
                    self.list
                        .CopyBufferRegion(&input, at, &self.upload, staged, len)
                };
                region.release(slab.start as usize, slab.end as usize);
                staged += len;
            }
        }
        self.input_filled(&input);
        Ok(())
    }

    /// Binds the inputs, output, temporary and persistent resources, and runs the Join.
    fn run(&mut self, dispatch: &Dispatch) -> Outcome<()> {
        let (output, _) = Gpu::ensure(
            &self.device,
            &mut self.output,
            dispatch.output.total_bytes,
            D3D12_RESOURCE_STATE_UNORDERED_ACCESS,
        )?;
        let key = dispatch.shape_key();
        let operator = self
            .operators
            .get(&key)
            .ok_or("the operator was not compiled")?
            .clone();
        let input = self
            .input
            .as_ref()
            .map(|(b, _)| b.clone())
            .ok_or("no input buffer")?;
        let inputs: Vec<DML_BUFFER_BINDING> = dispatch
            .inputs
            .iter()
            .map(|b| buffer_binding(&input, b.offset, b.desc.total_bytes))
            .collect();
        let input_descs: Vec<DML_BINDING_DESC> = inputs.iter().map(binding_desc).collect();
        let out_binding = buffer_binding(&output, 0, dispatch.output.total_bytes);
        let output_descs = [binding_desc(&out_binding)];
        self.record(&operator, &input_descs, &output_descs, &output)
    }

    /// Copies the dispatch's output to `out` through the readback buffer, a slab at a time.
    fn read_back(&mut self, plan: &DmlPlan, dispatch: &Dispatch, out: &mut dyn Sink) -> Result<()> {
        let output = self.output_buffer()?;
        self.read_back_slabs(&output, plan.slabs(0..dispatch.output.data_bytes()), out)?;
        self.output_read(&output)
    }
}

mod split_operator;
mod staging;
#[cfg(test)]
mod tests;
