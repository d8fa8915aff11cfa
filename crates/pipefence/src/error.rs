//! The error model (`docs/semantics.md` E1-E4).
//!
//! Every fallible public call returns [`Result<T>`]. Each [`Error`] carries a message that names
//! the object and the offending value, and maps to the D3D12 HRESULT a real runtime would return
//! ([`Error::hresult`]). Errors are for misuse and for device state (removal, timeouts); a panic
//! anywhere in the library is a bug.

use crate::command::ValueCondition;
use std::fmt;
use std::time::Duration;

/// D3D12 / DXGI result codes used by pipefence (E1, E4).
pub mod hresult {
    /// `E_INVALIDARG`.
    pub const INVALID_ARG: u32 = 0x8007_0057;
    /// `E_OUTOFMEMORY`.
    pub const OUT_OF_MEMORY: u32 = 0x8007_000E;
    /// `E_NOTIMPL`.
    pub const NOT_IMPLEMENTED: u32 = 0x8000_4001;
    /// `E_FAIL`.
    pub const FAIL: u32 = 0x8000_4005;
    /// `DXGI_ERROR_INVALID_CALL`.
    pub const INVALID_CALL: u32 = 0x887A_0001;
    /// `DXGI_ERROR_DEVICE_REMOVED`.
    pub const DEVICE_REMOVED: u32 = 0x887A_0005;
    /// `DXGI_ERROR_DEVICE_HUNG`.
    pub const DEVICE_HUNG: u32 = 0x887A_0006;
    /// `WAIT_TIMEOUT`.
    pub const WAIT_TIMEOUT: u32 = 0x0000_0102;
}

/// Why a device was removed (E4). The reason has its own HRESULT, distinct from the
/// `DeviceRemoved` error that later calls return.
#[doc(alias = "GetDeviceRemovedReason")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RemovalReason {
    /// A GPU hang: a stuck wait, an endless kernel, or a malformed packet (`DXGI_ERROR_DEVICE_HUNG`).
    Hung,
    /// A GPU page fault (M3); reported as `DXGI_ERROR_DEVICE_HUNG` like on D3D12.
    PageFault,
    /// An explicit [`Device::remove`](crate::Device::remove) (`DXGI_ERROR_DEVICE_REMOVED`).
    Requested,
}

impl RemovalReason {
    /// The HRESULT that `GetDeviceRemovedReason` reports for this reason (E4).
    pub fn hresult(self) -> u32 {
        match self {
            RemovalReason::Hung | RemovalReason::PageFault => hresult::DEVICE_HUNG,
            RemovalReason::Requested => hresult::DEVICE_REMOVED,
        }
    }

    /// The lower-case name used in scenario files and JSON (`hung`, `page-fault`, `requested`).
    pub fn name(self) -> &'static str {
        match self {
            RemovalReason::Hung => "hung",
            RemovalReason::PageFault => "page-fault",
            RemovalReason::Requested => "requested",
        }
    }

    /// The reason with this name (`hung`, `page-fault`, `requested`).
    pub fn from_name(name: &str) -> Option<RemovalReason> {
        [
            RemovalReason::Hung,
            RemovalReason::PageFault,
            RemovalReason::Requested,
        ]
        .into_iter()
        .find(|r| r.name() == name)
    }
}

impl fmt::Display for RemovalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A pipefence error. Every message names the object and the offending value (E2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument is invalid (`E_INVALIDARG`): the object and the value ([`Misuse`]).
    #[error("invalid argument: {0}")]
    InvalidArg(Box<Misuse>),
    /// The call is not valid in the object's current state (`DXGI_ERROR_INVALID_CALL`): the
    /// object and the value ([`Misuse`]).
    #[error("invalid call: {0}")]
    InvalidCall(Box<Misuse>),
    /// An allocation could not be satisfied (`E_OUTOFMEMORY`): the object and the size
    /// ([`Misuse`]).
    #[error("out of memory: {0}")]
    OutOfMemory(Box<Misuse>),
    /// The feature is not implemented (`E_NOTIMPL`).
    #[error("not implemented: {0}")]
    NotImplemented(String),
    /// An unspecified failure (`E_FAIL`).
    #[error("failure: {0}")]
    Fail(String),
    /// The device was removed; the call did nothing (`DXGI_ERROR_DEVICE_REMOVED`).
    #[error("device removed ({reason}): {what}")]
    DeviceRemoved {
        /// What the caller tried to do.
        what: String,
        /// Why the device was removed.
        reason: RemovalReason,
    },
    /// A wait ran out of time before its condition held (`WAIT_TIMEOUT`): what it waited for
    /// and what it saw ([`WaitTimeout`]).
    #[error("timed out: {0}")]
    Timeout(Box<WaitTimeout>),
}

/// What an [`Error::InvalidArg`], [`Error::InvalidCall`] or [`Error::OutOfMemory`] is about:
/// the object, the offending value where it is one number, and the message (its `Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Misuse {
    /// The object the call was made on or about.
    pub object: Object,
    /// The offending value where it is one number: an offset, a size, a count, flags, a
    /// descriptor field; `None` where it is not (a list of another kind, an unclosed list).
    pub value: Option<u64>,
    message: String,
}

/// The object of a [`Misuse`], by kind and name (the name given at creation; empty if none).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Object {
    /// The device, or its [`DeviceDesc`](crate::DeviceDesc).
    Device,
    /// A queue.
    Queue(String),
    /// A fence.
    Fence(String),
    /// A buffer.
    Buffer(String),
    /// A command list.
    CommandList(String),
}

impl Misuse {
    /// A misuse of `object` with the offending `value`, described by `message` (which names
    /// both).
    pub fn new(object: Object, value: Option<u64>, message: impl Into<String>) -> Self {
        Misuse {
            object,
            value,
            message: message.into(),
        }
    }

    /// The error message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Misuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A wait that timed out ([`Error::Timeout`]): the object, the condition, and what the wait saw
/// when it ended. Its `Display` is the error message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitTimeout {
    /// What was waited for, with the values seen at the end.
    pub waited: Waited,
    /// How long the wait lasted in real time; `None` on the deterministic driver, where a wait
    /// ends only when nothing can run (D6) and no time passed.
    pub after: Option<Duration>,
    message: String,
}

/// What a wait that timed out waited for ([`WaitTimeout::waited`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Waited {
    /// A fence reaching `value`; it had reached `completed`.
    Fence {
        /// The fence's name.
        fence: String,
        /// The value waited for.
        value: u64,
        /// The fence's completed value when the wait ended.
        completed: u64,
    },
    /// Several fences, all of them or any one: (name, value waited for, completed value).
    Fences {
        /// Each fence with the value it waited for and its completed value at the end.
        fences: Vec<(String, u64, u64)>,
        /// `true` for a wait on any one of them.
        any: bool,
    },
    /// A memory word meeting a condition; it held `value` at the end.
    Memory {
        /// The buffer's name.
        buffer: String,
        /// The byte offset in the buffer.
        offset: u64,
        /// The condition waited for.
        condition: ValueCondition,
        /// The word's value when the wait ended.
        value: u64,
    },
    /// A queue becoming idle: `completed` of `submitted` submissions had completed.
    QueueIdle {
        /// The queue's name.
        queue: String,
        /// Submissions completed when the wait ended.
        completed: u64,
        /// Submissions made.
        submitted: u64,
    },
    /// Every queue of the device becoming idle; `busy` names a queue still busy (with its
    /// completed and submitted counts) where the driver knows one.
    DeviceIdle {
        /// A queue still busy: (name, submissions completed, submissions made).
        busy: Option<(String, u64, u64)>,
    },
}

impl WaitTimeout {
    /// The error message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for WaitTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error {
    /// The D3D12 HRESULT for this error (E1).
    pub fn hresult(&self) -> u32 {
        match self {
            Error::InvalidArg(_) => hresult::INVALID_ARG,
            Error::InvalidCall(_) => hresult::INVALID_CALL,
            Error::OutOfMemory(_) => hresult::OUT_OF_MEMORY,
            Error::NotImplemented(_) => hresult::NOT_IMPLEMENTED,
            Error::Fail(_) => hresult::FAIL,
            Error::DeviceRemoved { .. } => hresult::DEVICE_REMOVED,
            Error::Timeout(_) => hresult::WAIT_TIMEOUT,
        }
    }

    /// What a timed-out wait waited for and saw; `None` for other errors.
    pub fn wait_timeout(&self) -> Option<&WaitTimeout> {
        match self {
            Error::Timeout(t) => Some(t),
            _ => None,
        }
    }

    /// A timeout of a wait for `waited`, after `after` of real time (`None`: virtual time),
    /// with the message `message`.
    pub(crate) fn timeout(waited: Waited, after: Option<Duration>, message: String) -> Self {
        Error::Timeout(Box::new(WaitTimeout {
            waited,
            after,
            message,
        }))
    }

    /// What a misuse error ([`Error::InvalidArg`], [`Error::InvalidCall`],
    /// [`Error::OutOfMemory`]) is about; `None` for other errors.
    pub fn misuse(&self) -> Option<&Misuse> {
        match self {
            Error::InvalidArg(m) | Error::InvalidCall(m) | Error::OutOfMemory(m) => Some(m),
            _ => None,
        }
    }

    /// True for [`Error::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_))
    }

    /// True for [`Error::DeviceRemoved`].
    pub fn is_device_removed(&self) -> bool {
        matches!(self, Error::DeviceRemoved { .. })
    }

    /// [`Error::InvalidArg`] about `object` and `value`.
    pub(crate) fn invalid_arg(object: Object, value: Option<u64>, msg: impl Into<String>) -> Self {
        Error::InvalidArg(Box::new(Misuse::new(object, value, msg)))
    }

    /// [`Error::InvalidCall`] about `object` and `value`.
    pub(crate) fn invalid_call(object: Object, value: Option<u64>, msg: impl Into<String>) -> Self {
        Error::InvalidCall(Box::new(Misuse::new(object, value, msg)))
    }

    /// [`Error::OutOfMemory`] about `object` and the size `value`.
    pub(crate) fn out_of_memory(
        object: Object,
        value: Option<u64>,
        msg: impl Into<String>,
    ) -> Self {
        Error::OutOfMemory(Box::new(Misuse::new(object, value, msg)))
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
