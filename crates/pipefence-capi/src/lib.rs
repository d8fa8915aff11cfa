//! # pipefence-capi
//!
//! The pipefence API in C and C++, so that an engine's own D3D12 submission code (its queue
//! waits and signals, `Wait32BitValueX`, `Write64BitValueBottomOfPipeX`, CPU fence waits) can
//! be compiled against the software GPU in a test build and run, checked and explored.
//!
//! - `include/pipefence/pipefence.h`: the C API, generated from this crate by cbindgen (the
//!   `header` test fails when the committed header and the code disagree). Plain functions
//!   over opaque, reference-counted handles; every fallible call returns an `HRESULT` with
//!   the value [`pipefence::Error::hresult`] gives.
//! - `include/pipefence/d3d12.h`: a header-only C++ layer over it in `pipefence::d3d12`, with
//!   D3D12's type, method, enum and constant names and parameter order.
//!
//! Built as a static library (`libpipefence_capi.a`, links with `-lpthread -ldl -lm`) and a
//! shared one; the rlib is for this crate's own tests.
//!
//! ## The boundary
//!
//! - A handle is a key into a registry of live objects, never dereferenced: a null handle is
//!   `E_POINTER`, a released or made-up one, or a handle of another kind, `E_INVALIDARG`.
//!   Objects of another device are `E_INVALIDARG` too (the Rust API checks them).
//! - No panic crosses it: a panic is caught, the call returns `E_FAIL`, the message is the
//!   thread's last error (`pipefence_last_error_message`) and the device the call involves
//!   is removed (reason hung) with its removal report.
//! - Every failing call sets the thread's last-error message (the Rust error's text, which
//!   names the object and the value).

mod buffer;
mod device;
mod explore;
mod handle;
mod list;
mod queue;
mod types;

pub use buffer::*;
pub use device::*;
pub use explore::*;
pub use list::*;
pub use queue::*;
pub use types::*;

#[cfg(test)]
mod tests {
    use super::*;
    use pipefence::{Device, DeviceDesc, Error, Misuse, Object};

    #[test]
    fn hresults_are_the_rust_errors() {
        let misuse = || Box::new(Misuse::new(Object::Device, None, ""));
        let cases = [
            (Error::InvalidArg(misuse()), PIPEFENCE_E_INVALIDARG),
            (
                Error::InvalidCall(misuse()),
                PIPEFENCE_DXGI_ERROR_INVALID_CALL,
            ),
            (Error::OutOfMemory(misuse()), PIPEFENCE_E_OUTOFMEMORY),
            (Error::NotImplemented(String::new()), PIPEFENCE_E_NOTIMPL),
            (Error::Fail(String::new()), PIPEFENCE_E_FAIL),
            (
                Error::DeviceRemoved {
                    what: String::new(),
                    reason: pipefence::RemovalReason::Hung,
                },
                PIPEFENCE_DXGI_ERROR_DEVICE_REMOVED,
            ),
        ];
        for (e, hr) in cases {
            assert_eq!(e.hresult() as i32, hr, "{e:?}");
        }
        assert_eq!(
            pipefence::RemovalReason::Hung.hresult() as i32,
            PIPEFENCE_DXGI_ERROR_DEVICE_HUNG
        );
        assert_eq!(
            pipefence::RemovalReason::Requested.hresult() as i32,
            PIPEFENCE_DXGI_ERROR_DEVICE_REMOVED
        );
    }

    #[test]
    fn a_panic_is_e_fail_and_removes_the_device_it_involves() {
        let d = Device::new(DeviceDesc::default()).unwrap();
        let hr = handle::call("test_call", |ctx| {
            ctx.involve(&d);
            panic!("boom");
        });
        assert_eq!(hr, PIPEFENCE_E_FAIL);
        assert!(
            handle::last_error().contains("boom"),
            "{}",
            handle::last_error()
        );
        assert!(d.is_removed());
        assert!(d.removal_report().is_some());
        // Without a device, only the HRESULT.
        assert_eq!(handle::call("x", |_| panic!("again")), PIPEFENCE_E_FAIL);
    }

    #[test]
    fn handles_are_checked_before_use() {
        let mut dev = std::ptr::null_mut();
        // SAFETY: a null description and a valid out-pointer.
        let hr = unsafe { pipefence_device_create(std::ptr::null(), &mut dev) };
        assert_eq!(hr, PIPEFENCE_S_OK);
        let mut fence = std::ptr::null_mut();
        // SAFETY: valid out-pointer, null name.
        let hr = unsafe { pipefence_device_create_fence(dev, 0, 0, std::ptr::null(), &mut fence) };
        assert_eq!(hr, PIPEFENCE_S_OK);
        // A fence handle where a queue is expected, a made-up one, a null one.
        let hr = pipefence_queue_signal(fence.cast(), fence, 1);
        assert_eq!(hr, PIPEFENCE_E_INVALIDARG);
        assert!(handle::last_error().contains("fence handle, not a queue"));
        assert_eq!(
            pipefence_fence_signal(8usize as *mut _, 1),
            PIPEFENCE_E_INVALIDARG
        );
        assert_eq!(
            pipefence_fence_signal(std::ptr::null_mut(), 1),
            PIPEFENCE_E_POINTER
        );
        assert_eq!(pipefence_fence_add_ref(fence), 2);
        assert_eq!(pipefence_fence_release(fence), 1);
        assert_eq!(pipefence_fence_release(fence), 0);
        // Released: no longer a handle.
        assert_eq!(pipefence_fence_signal(fence, 1), PIPEFENCE_E_INVALIDARG);
        assert_eq!(pipefence_fence_get_completed_value(fence), u64::MAX);
        assert_eq!(pipefence_device_release(dev), 0);
    }
}
