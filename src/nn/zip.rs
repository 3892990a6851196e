//! A small reader of zip archives held in memory, for `torch_load` (PyTorch's checkpoints are
//! zip archives): the central directory (zip64 included), stored and deflated entries, CRC-32
//! checked. Every size and offset read from the archive is checked against the bytes there are
//! before it is used, and a deflated entry may not claim more than deflate can produce from its
//! compressed bytes, so a malformed archive is an `Err` saying what is wrong, never a panic or a
//! huge allocation. Errors carry no prefix: the caller names the format.

use crate::error::{bail, Result};
use std::borrow::Cow;
use std::io::Read;

const EOCD: u32 = 0x0605_4b50;
const EOCD64: u32 = 0x0606_4b50;
const EOCD64_LOCATOR: u32 = 0x0706_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const LOCAL: u32 = 0x0403_4b50;
const EOCD_LEN: usize = 22;
/// The most deflate can expand: 258 bytes from one bit, about 1032:1.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// One file of the archive: its name and its bytes as stored (compressed or not).
pub(super) struct Entry<'a> {
    pub name: String,
    method: u16,
    crc: u32,
    size: u64,
    raw: &'a [u8],
}

fn field<const N: usize>(b: &[u8], at: usize, what: &str) -> Result<[u8; N]> {
    match at.checked_add(N).and_then(|end| b.get(at..end)) {
        Some(s) => Ok(s.try_into().expect("N bytes")),
        None => bail!(
            Io,
            "zip archive truncated: {what} at byte {at} runs past its end ({} bytes)",
            b.len()
        ),
    }
}
fn u16_at(b: &[u8], at: usize, what: &str) -> Result<u16> {
    field::<2>(b, at, what).map(u16::from_le_bytes)
}
fn u32_at(b: &[u8], at: usize, what: &str) -> Result<u32> {
    field::<4>(b, at, what).map(u32::from_le_bytes)
}
fn u64_at(b: &[u8], at: usize, what: &str) -> Result<u64> {
    field::<8>(b, at, what).map(u64::from_le_bytes)
}
fn offset(v: u64, b: &[u8], what: &str) -> Result<usize> {
    match usize::try_from(v) {
        Ok(v) if v <= b.len() => Ok(v),
        _ => bail!(
            Io,
            "zip archive: {what} {v} is past the end of the archive ({} bytes)",
            b.len()
        ),
    }
}

/// Whether `b` starts like a zip archive (a local file header or an empty archive's end record).
pub(super) fn is_zip(b: &[u8]) -> bool {
    b.starts_with(&LOCAL.to_le_bytes()) || b.starts_with(&EOCD.to_le_bytes())
}

/// The entries of the archive `b`, in central-directory order.
pub(super) fn entries(b: &[u8]) -> Result<Vec<Entry<'_>>> {
    // The end-of-central-directory record is the last 22 bytes, or more with a comment (up to
    // 65535 bytes): search backwards for its signature.
    if b.len() < EOCD_LEN {
        bail!(
            Io,
            "zip archive truncated: {} bytes, shorter than its 22-byte end record",
            b.len()
        );
    }
    let last = b.len() - EOCD_LEN;
    let Some(eocd) = (last.saturating_sub(0xffff)..=last)
        .rev()
        .find(|&i| b[i..i + 4] == EOCD.to_le_bytes())
    else {
        bail!(
            Io,
            "zip archive truncated or corrupt: no end-of-central-directory record in its last \
             64 KiB"
        );
    };
    let mut count = u16_at(b, eocd + 10, "the entry count")? as u64;
    let mut cd_size = u32_at(b, eocd + 12, "the central directory size")? as u64;
    let mut cd_at = u32_at(b, eocd + 16, "the central directory offset")? as u64;
    if count == 0xffff || cd_size == 0xffff_ffff || cd_at == 0xffff_ffff {
        // zip64: a locator just before the end record points at the zip64 end record.
        let loc = eocd
            .checked_sub(20)
            .filter(|&l| u32_at(b, l, "the zip64 locator").ok() == Some(EOCD64_LOCATOR));
        let Some(loc) = loc else {
            bail!(
                Io,
                "zip archive: zip64 sizes without a zip64 end-record locator"
            );
        };
        let at = offset(
            u64_at(b, loc + 8, "the zip64 end-record offset")?,
            b,
            "zip64 end record",
        )?;
        if u32_at(b, at, "the zip64 end record")? != EOCD64 {
            bail!(Io, "zip archive: no zip64 end record at byte {at}");
        }
        count = u64_at(b, at + 32, "the zip64 entry count")?;
        cd_size = u64_at(b, at + 40, "the zip64 central directory size")?;
        cd_at = u64_at(b, at + 48, "the zip64 central directory offset")?;
    }
    let cd_at = offset(cd_at, b, "central directory offset")?;
    let cd_end = offset(
        (cd_at as u64).saturating_add(cd_size),
        b,
        "central directory end",
    )?;
    let cd = &b[cd_at..cd_end];
    let mut out = Vec::new();
    let mut p = 0usize;
    for i in 0..count {
        if u32_at(cd, p, "a central directory entry")? != CENTRAL {
            bail!(
                Io,
                "zip archive: central directory entry {i} of {count} has a wrong signature"
            );
        }
        let flags = u16_at(cd, p + 8, "the entry flags")?;
        let method = u16_at(cd, p + 10, "the compression method")?;
        let crc = u32_at(cd, p + 16, "the CRC-32")?;
        let mut csize = u32_at(cd, p + 20, "the compressed size")? as u64;
        let mut size = u32_at(cd, p + 24, "the size")? as u64;
        let nlen = u16_at(cd, p + 28, "the name length")? as usize;
        let xlen = u16_at(cd, p + 30, "the extra field length")? as usize;
        let clen = u16_at(cd, p + 32, "the comment length")? as usize;
        let mut local = u32_at(cd, p + 42, "the local header offset")? as u64;
        let name_at = p + 46;
        let Some(name) = cd.get(name_at..name_at + nlen) else {
            bail!(
                Io,
                "zip archive truncated: entry {i}'s name runs past the central directory"
            );
        };
        let name = String::from_utf8_lossy(name).into_owned();
        let Some(extra) = cd.get(name_at + nlen..name_at + nlen + xlen) else {
            bail!(
                Io,
                "zip archive truncated: '{name}': extra field runs past the central directory"
            );
        };
        // zip64 extended information: the 64-bit values of the fields saturated above, in order.
        let mut x = 0usize;
        while x + 4 <= extra.len() {
            let id = u16_at(extra, x, "an extra field id")?;
            let len = u16_at(extra, x + 2, "an extra field length")? as usize;
            if id == 1 {
                let mut q = x + 4;
                for v in [&mut size, &mut csize, &mut local] {
                    if *v == 0xffff_ffff {
                        *v = u64_at(extra, q, "a zip64 extended field")?;
                        q += 8;
                    }
                }
            }
            x += 4 + len;
        }
        p = name_at + nlen + xlen + clen;
        if flags & 1 != 0 {
            bail!(Io, "zip archive: '{name}' is encrypted");
        }
        // The data follows the local header, whose name and extra field (torch pads it to
        // align the data) may differ in length from the central directory's.
        let local = offset(local, b, &format!("'{name}': local header offset"))?;
        if u32_at(b, local, "a local header")? != LOCAL {
            bail!(Io, "zip archive: '{name}': no local header at byte {local}");
        }
        let skip = 30
            + u16_at(b, local + 26, "a local name length")? as usize
            + u16_at(b, local + 28, "a local extra length")? as usize;
        let start = offset(
            local as u64 + skip as u64,
            b,
            &format!("'{name}': data start"),
        )?;
        let Some(raw) = (start as u64)
            .checked_add(csize)
            .filter(|&e| e <= b.len() as u64)
            .map(|e| &b[start..e as usize])
        else {
            bail!(
                Io,
                "zip archive truncated: '{name}' has {csize} bytes at byte {start}, past the end \
                 ({} bytes)",
                b.len()
            );
        };
        out.push(Entry {
            name,
            method,
            crc,
            size,
            raw,
        });
    }
    Ok(out)
}

impl<'a> Entry<'a> {
    /// The entry's bytes, decompressed and checked against its CRC-32.
    pub(super) fn data(&self) -> Result<Cow<'a, [u8]>> {
        let name = &self.name;
        let data: Cow<'a, [u8]> = match self.method {
            0 => {
                if self.raw.len() as u64 != self.size {
                    bail!(
                        Io,
                        "zip archive: stored entry '{name}' has {} bytes, its header says {}",
                        self.raw.len(),
                        self.size
                    );
                }
                Cow::Borrowed(self.raw)
            }
            8 => {
                let most = (self.raw.len() as u64).saturating_mul(MAX_DEFLATE_RATIO) + 1024;
                if self.size > most {
                    bail!(
                        Io,
                        "zip archive: '{name}' claims {} bytes from {} deflated bytes, more than \
                         deflate can produce",
                        self.size,
                        self.raw.len()
                    );
                }
                // Grown as the data inflates, not sized by the header's claim.
                let mut out = Vec::with_capacity(self.size.min(4 * self.raw.len() as u64) as usize);
                let dec = flate2::read::DeflateDecoder::new(self.raw);
                if let Err(e) = dec.take(self.size + 1).read_to_end(&mut out) {
                    bail!(Io, "zip archive: '{name}': corrupt deflate data: {e}");
                }
                if out.len() as u64 != self.size {
                    bail!(
                        Io,
                        "zip archive: '{name}' inflates to {}{} bytes, its header says {}",
                        if out.len() as u64 > self.size {
                            "more than "
                        } else {
                            ""
                        },
                        out.len().min(self.size as usize),
                        self.size
                    );
                }
                Cow::Owned(out)
            }
            m => bail!(
                Io,
                "zip archive: '{name}' uses compression method {m} (stored and deflated entries \
                 are read)"
            ),
        };
        let mut crc = flate2::Crc::new();
        crc.update(&data);
        if crc.sum() != self.crc {
            bail!(
                Io,
                "zip archive: '{name}' fails its CRC-32 check ({:08x}, its header says {:08x}): \
                 the file is corrupt",
                crc.sum(),
                self.crc
            );
        }
        Ok(data)
    }
}
