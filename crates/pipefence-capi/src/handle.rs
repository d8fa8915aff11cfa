//! Handles at the boundary: a registry of live objects keyed by the address handed to C, with
//! a reference count per handle (`AddRef`/`Release`), and the call wrapper that turns errors
//! and panics into HRESULTs.
//!
//! A handle is only a key: nothing is ever read through it. A call first looks the address up
//! (a null one is `E_POINTER`; one that is not a live handle, or a handle of another kind, is
//! `E_INVALIDARG`) and clones the object out under the registry lock, so a concurrent
//! `Release` of the last reference cannot free an object a call is using.

use crate::types::*;
use pipefence::Device;
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// The kind of object a handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Device,
    Queue,
    Fence,
    Event,
    Buffer,
    CommandList,
    ExploreResult,
    Host,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Device => "device",
            Kind::Queue => "queue",
            Kind::Fence => "fence",
            Kind::Event => "event",
            Kind::Buffer => "buffer",
            Kind::CommandList => "command list",
            Kind::ExploreResult => "explore result",
            Kind::Host => "host thread",
        }
    }
}

/// An object that C code holds handles to.
pub(crate) trait Object: Any + Send + Sync {
    const KIND: Kind;
}

struct Entry {
    kind: Kind,
    refs: u32,
    obj: Arc<dyn Any + Send + Sync>,
}

fn registry() -> MutexGuard<'static, HashMap<usize, Entry>> {
    static REGISTRY: OnceLock<Mutex<HashMap<usize, Entry>>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// A failed call: the HRESULT and the message for `pipefence_last_error_message`.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) hr: PIPEFENCE_HRESULT,
    pub(crate) msg: String,
}

impl Fail {
    pub(crate) fn new(hr: PIPEFENCE_HRESULT, msg: impl Into<String>) -> Self {
        Fail {
            hr,
            msg: msg.into(),
        }
    }

    pub(crate) fn pointer(msg: impl Into<String>) -> Self {
        Fail::new(PIPEFENCE_E_POINTER, msg)
    }

    pub(crate) fn arg(msg: impl Into<String>) -> Self {
        Fail::new(PIPEFENCE_E_INVALIDARG, msg)
    }
}

impl From<pipefence::Error> for Fail {
    fn from(e: pipefence::Error) -> Self {
        Fail {
            hr: e.hresult() as PIPEFENCE_HRESULT,
            msg: e.to_string(),
        }
    }
}

/// The result of a call's body.
pub(crate) type Res<T = ()> = Result<T, Fail>;

/// Registers `obj` with one reference and returns its handle.
pub(crate) fn register<T: Object>(obj: T) -> *mut std::ffi::c_void {
    let arc = Arc::new(obj);
    let key = Arc::as_ptr(&arc) as *const () as usize;
    registry().insert(
        key,
        Entry {
            kind: T::KIND,
            refs: 1,
            obj: arc,
        },
    );
    key as *mut std::ffi::c_void
}

/// The object behind `handle`, checked to be a live handle of `T`'s kind.
pub(crate) fn get<T: Object, H>(handle: *const H, what: &str) -> Res<Arc<T>> {
    if handle.is_null() {
        return Err(Fail::pointer(format!(
            "{what}: the {} handle is null",
            T::KIND.name()
        )));
    }
    let key = handle as usize;
    let obj = {
        let reg = registry();
        match reg.get(&key) {
            None => {
                return Err(Fail::arg(format!(
                    "{what}: {key:#x} is not a live pipefence {} handle (released, or not \
                     made by pipefence)",
                    T::KIND.name()
                )))
            }
            Some(e) if e.kind != T::KIND => {
                return Err(Fail::arg(format!(
                    "{what}: {key:#x} is a {} handle, not a {} handle",
                    e.kind.name(),
                    T::KIND.name()
                )))
            }
            Some(e) => e.obj.clone(),
        }
    };
    obj.downcast::<T>()
        .map_err(|_| Fail::arg(format!("{what}: handle {key:#x} has the wrong type")))
}

/// Adds a reference; returns the new count (0 and a last-error message for a bad handle).
pub(crate) fn add_ref<T: Object, H>(handle: *const H) -> u32 {
    let what = "AddRef";
    let r = (|| {
        if handle.is_null() {
            return Err(Fail::pointer(format!(
                "{what}: null {} handle",
                T::KIND.name()
            )));
        }
        let mut reg = registry();
        match reg.get_mut(&(handle as usize)) {
            Some(e) if e.kind == T::KIND => {
                e.refs = e.refs.saturating_add(1);
                Ok(e.refs)
            }
            _ => Err(Fail::arg(format!(
                "{what}: {:#x} is not a live pipefence {} handle",
                handle as usize,
                T::KIND.name()
            ))),
        }
    })();
    r.unwrap_or_else(|f| {
        set_last_error(&f.msg);
        0
    })
}

/// Drops a reference; the object is destroyed with the last one. Returns the new count (0 and
/// a last-error message for a bad handle).
pub(crate) fn release<T: Object, H>(handle: *const H) -> u32 {
    let what = "Release";
    let mut dropped = None;
    let r = (|| {
        if handle.is_null() {
            return Err(Fail::pointer(format!(
                "{what}: null {} handle",
                T::KIND.name()
            )));
        }
        let key = handle as usize;
        let mut reg = registry();
        match reg.get_mut(&key) {
            Some(e) if e.kind == T::KIND => {
                e.refs -= 1;
                let left = e.refs;
                if left == 0 {
                    dropped = reg.remove(&key);
                }
                Ok(left)
            }
            _ => Err(Fail::arg(format!(
                "{what}: {key:#x} is not a live pipefence {} handle",
                T::KIND.name()
            ))),
        }
    })();
    // The object is dropped outside the registry lock: dropping a device stops its threads,
    // and a deterministic device runs what can still run.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(dropped)));
    r.unwrap_or_else(|f| {
        set_last_error(&f.msg);
        0
    })
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

pub(crate) fn set_last_error(msg: &str) {
    LAST_ERROR.with(|l| {
        let mut l = l.borrow_mut();
        l.clear();
        l.push_str(msg);
    });
}

pub(crate) fn last_error() -> String {
    LAST_ERROR.with(|l| l.borrow().clone())
}

/// What a call's body may tell the wrapper: the device it involves, so that a panic removes
/// that device with a report.
#[derive(Debug, Default)]
pub(crate) struct Ctx {
    pub(crate) device: Option<Device>,
}

impl Ctx {
    pub(crate) fn involve(&mut self, device: &Device) {
        if self.device.is_none() {
            self.device = Some(device.clone());
        }
    }
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Runs a call's body: its HRESULT, or the failure's (with the last-error message set); a
/// panic is caught, becomes `E_FAIL`, and removes the device the call involves (reason Hung,
/// with the removal report), so no panic crosses the boundary.
pub(crate) fn call(
    what: &str,
    f: impl FnOnce(&mut Ctx) -> Res<PIPEFENCE_HRESULT>,
) -> PIPEFENCE_HRESULT {
    let mut ctx = Ctx::default();
    let r = catch_unwind(AssertUnwindSafe(|| f(&mut ctx)));
    match r {
        Ok(Ok(hr)) => hr,
        Ok(Err(fail)) => {
            set_last_error(&fail.msg);
            fail.hr
        }
        Err(payload) => {
            let msg = panic_message(&*payload);
            set_last_error(&format!(
                "{what}: internal error (a panic in pipefence, caught at the C boundary): {msg}"
            ));
            if let Some(d) = ctx.device.take() {
                let _ = catch_unwind(AssertUnwindSafe(move || {
                    d.tools().declare_hung();
                }));
            }
            PIPEFENCE_E_FAIL
        }
    }
}

/// [`call`] for a body that returns a value: `fallback` on failure.
pub(crate) fn call_value<T>(what: &str, fallback: T, f: impl FnOnce(&mut Ctx) -> Res<T>) -> T {
    let mut out = None;
    let _ = call(what, |ctx| {
        out = Some(f(ctx)?);
        Ok(PIPEFENCE_S_OK)
    });
    out.unwrap_or(fallback)
}

/// Writes `value` through the out-pointer `out` (`E_POINTER` if it is null).
///
/// # Safety
/// `out` is null or valid for a write of `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, value: T, what: &str) -> Res {
    if out.is_null() {
        return Err(Fail::pointer(format!("{what}: the output pointer is null")));
    }
    // SAFETY: non-null, and the caller promises it is valid for a write of T.
    unsafe { out.write(value) };
    Ok(())
}

/// The text at `p` (null: `None`). Invalid UTF-8 is replaced, not rejected.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that lives for the call.
pub(crate) unsafe fn c_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated by the caller's promise.
    let s = unsafe { std::ffi::CStr::from_ptr(p) };
    Some(s.to_string_lossy().into_owned())
}

/// The `n` elements at `p` (`E_POINTER` if `p` is null and `n > 0`).
///
/// # Safety
/// `p` is null or valid for reads of `n` elements that live for `'a`.
pub(crate) unsafe fn slice<'a, T>(p: *const T, n: usize, what: &str) -> Res<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Fail::pointer(format!("{what}: the array pointer is null")));
    }
    // SAFETY: non-null, and the caller promises n readable elements.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Copies `text` into `buf` (`len` bytes, NUL-terminated, truncated if short) and stores the
/// size it needs, NUL included, in `needed` (if not null). `E_NOT_SUFFICIENT_BUFFER` if it
/// did not fit (a null `buf` with `len` 0 asks only for the size).
///
/// # Safety
/// `buf` is null or valid for writes of `len` bytes; `needed` is null or valid for a write.
pub(crate) unsafe fn copy_text(
    text: &str,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> Res<PIPEFENCE_HRESULT> {
    let bytes = text.as_bytes();
    if !needed.is_null() {
        // SAFETY: non-null and valid for a write by the caller's promise.
        unsafe { needed.write(bytes.len() + 1) };
    }
    if buf.is_null() {
        if len == 0 {
            return Ok(if bytes.is_empty() {
                PIPEFENCE_S_OK
            } else {
                PIPEFENCE_E_NOT_SUFFICIENT_BUFFER
            });
        }
        return Err(Fail::pointer(
            "the text buffer is null but its length is not 0",
        ));
    }
    if len == 0 {
        return Ok(PIPEFENCE_E_NOT_SUFFICIENT_BUFFER);
    }
    let n = bytes.len().min(len - 1);
    // SAFETY: buf is valid for len bytes; n + 1 <= len, and the source is a live slice that
    // cannot overlap memory the caller gave us for writing.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n);
        buf.add(n).write(0);
    }
    Ok(if n == bytes.len() {
        PIPEFENCE_S_OK
    } else {
        PIPEFENCE_E_NOT_SUFFICIENT_BUFFER
    })
}
