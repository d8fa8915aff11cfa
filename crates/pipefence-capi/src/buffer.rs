//! Buffers: GPU addresses and CPU access under the heap rules.

use crate::handle::*;
use crate::types::*;
use pipefence::Buffer;

pub(crate) struct BufferObj(pub(crate) Buffer);

impl Object for BufferObj {
    const KIND: Kind = Kind::Buffer;
}

/// Adds a reference to a buffer; returns the new count (0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_buffer_add_ref(buffer: *mut PipefenceBuffer) -> u32 {
    add_ref::<BufferObj, _>(buffer)
}

/// Drops a reference to a buffer. With the last one the memory is unmapped once the work
/// submitted before has completed; a later GPU access to it faults.
#[no_mangle]
pub extern "C" fn pipefence_buffer_release(buffer: *mut PipefenceBuffer) -> u32 {
    release::<BufferObj, _>(buffer)
}

/// `GetGPUVirtualAddress`: the address of byte 0 (256-byte aligned; 0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_buffer_get_gpu_virtual_address(buffer: *mut PipefenceBuffer) -> u64 {
    let what = "pipefence_buffer_get_gpu_virtual_address";
    call_value(what, 0, |_| {
        Ok(get::<BufferObj, _>(buffer, what)?.0.gpu_address())
    })
}

/// The size in bytes (0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_buffer_get_size(buffer: *mut PipefenceBuffer) -> u64 {
    let what = "pipefence_buffer_get_size";
    call_value(what, 0, |_| Ok(get::<BufferObj, _>(buffer, what)?.0.size()))
}

/// Reads the u32 at `offset` (4-byte aligned). `DXGI_ERROR_INVALID_CALL` on a heap the CPU
/// may not read (DEFAULT), `E_INVALIDARG` for a misaligned or out-of-range offset.
///
/// # Safety
/// `value` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_buffer_read_u32(
    buffer: *mut PipefenceBuffer,
    offset: u64,
    value: *mut u32,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_buffer_read_u32";
    call(what, |_| {
        let v = get::<BufferObj, _>(buffer, what)?.0.read_u32(offset)?;
        // SAFETY: the caller's promise.
        unsafe { write_out(value, v, what)? };
        Ok(PIPEFENCE_S_OK)
    })
}

/// Reads the u64 at `offset` (8-byte aligned); errors as `pipefence_buffer_read_u32`.
///
/// # Safety
/// `value` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_buffer_read_u64(
    buffer: *mut PipefenceBuffer,
    offset: u64,
    value: *mut u64,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_buffer_read_u64";
    call(what, |_| {
        let v = get::<BufferObj, _>(buffer, what)?.0.read_u64(offset)?;
        // SAFETY: the caller's promise.
        unsafe { write_out(value, v, what)? };
        Ok(PIPEFENCE_S_OK)
    })
}

/// Writes the u32 at `offset` and wakes the GPU and CPU waits on it.
/// `DXGI_ERROR_INVALID_CALL` on a heap the CPU may not write (DEFAULT, READBACK).
#[no_mangle]
pub extern "C" fn pipefence_buffer_write_u32(
    buffer: *mut PipefenceBuffer,
    offset: u64,
    value: u32,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_buffer_write_u32";
    call(what, |_| {
        get::<BufferObj, _>(buffer, what)?
            .0
            .write_u32(offset, value)?;
        Ok(PIPEFENCE_S_OK)
    })
}

/// Writes the u64 at `offset` (8-byte aligned); errors as `pipefence_buffer_write_u32`.
#[no_mangle]
pub extern "C" fn pipefence_buffer_write_u64(
    buffer: *mut PipefenceBuffer,
    offset: u64,
    value: u64,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_buffer_write_u64";
    call(what, |_| {
        get::<BufferObj, _>(buffer, what)?
            .0
            .write_u64(offset, value)?;
        Ok(PIPEFENCE_S_OK)
    })
}
