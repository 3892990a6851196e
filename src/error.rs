//! The crate's error type: every failure reachable from user input is an `Err` naming the op and
//! the shapes / dtypes / devices involved.

use std::fmt;

/// What went wrong, with a message that names the op and its operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub msg: String,
}

/// Coarse classes of errors, for callers that want to branch on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Shape,
    DType,
    Device,
    /// The device was lost (a driver reset, `GPUDevice.destroy()`): what was on it is gone.
    DeviceLost,
    Backend,
    Io,
    Jit,
    Other,
}

impl Error {
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

pub type Result<T> = std::result::Result<T, Error>;

/// Build an `Err(Error)` of the given kind with a formatted message.
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::Error::new($crate::error::ErrorKind::$kind, format!($($arg)*)))
    };
}
pub(crate) use bail;
