//! The crate's error type: every failure reachable from user input is an `Err` naming the op and
//! the shapes / dtypes / devices involved.

use std::fmt;

/// What went wrong, with a message that names the op and its operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The class of the failure, for callers that branch on it.
    pub kind: ErrorKind,
    /// The message: names the op and its operands (shapes, dtypes, devices). `Display` prints it.
    pub msg: String,
}

/// Coarse classes of errors, for callers that want to branch on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Shapes that do not fit the op (broadcasting, reshape sizes, axes out of range, …).
    Shape,
    /// A dtype the op does not accept, or one the device cannot store.
    DType,
    /// An unknown or unavailable device, tensors on different devices, or a device limit exceeded.
    Device,
    /// The device was lost (a driver reset, `GPUDevice.destroy()`): what was on it is gone.
    DeviceLost,
    /// The backend failed: a compiler error, an allocation or launch refused by the driver.
    Backend,
    /// Reading or writing a file, fetching a URL, or parsing a file format (IDX, safetensors, …).
    Io,
    /// A TinyJit misuse: inputs that do not match the capture, a readback during capture, nesting.
    Jit,
    /// Anything else.
    Other,
}

impl Error {
    /// An error of `kind` with the message `msg`.
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Self {
        Error {
            kind,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::new(ErrorKind::Io, e.to_string())
    }
}

/// The crate's result type: `Err` carries an [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Build an `Err(Error)` of the given kind with a formatted message.
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::Error::new($crate::error::ErrorKind::$kind, format!($($arg)*)))
    };
}
pub(crate) use bail;
