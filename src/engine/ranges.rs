//! Byte ranges of files copied as they are into an output, with zeros between them: GGUF's
//! merge and split carry every tensor's bytes (quantized blocks included) without looking
//! at them. The kernel copies where it can (`copy_file_range`); otherwise one reused buffer
//! of [`super::BUFFER`] bytes carries them, so memory stays constant whatever the sizes.

use std::fs::File;

use crate::error::{Error, InputRef, Result};
use crate::format::Sink;

/// One piece of an output: a range of an input file, or zeros.
pub enum Piece<'f> {
    /// `len` bytes of `file` from `offset`; messages name the file `name`.
    Range {
        /// The input file.
        file: &'f File,
        /// How messages name it.
        name: &'f InputRef,
        /// Where the bytes start.
        offset: u64,
        /// How many.
        len: u64,
    },
    /// Zero bytes (padding), few.
    Zeros(u64),
}

/// Writes `pieces` to `out` in order, calling `progress` with the bytes of each piece done.
pub fn copy_pieces<'f>(
    pieces: impl IntoIterator<Item = Piece<'f>>,
    out: &mut dyn Sink,
    mut progress: impl FnMut(u64),
) -> Result<()> {
    let failed = |e, out: &dyn Sink| Error::io("write", out.name(), e);
    let mut buffer: Vec<u8> = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Zeros(n_zeros) => {
                let mut n = n_zeros;
                // An alignment may be any power of two up to 2^31: zeros in small writes.
                const ZEROS: [u8; 4096] = [0; 4096];
                while n > 0 {
                    let part = n.min(ZEROS.len() as u64);
                    out.write_all(&ZEROS[..part as usize])
                        .map_err(|e| failed(e, out))?;
                    n -= part;
                }
                progress(n_zeros);
            }
            Piece::Range {
                file,
                name,
                offset,
                len,
            } => {
                let mut done = out
                    .copy_from(file, offset, len)
                    .map_err(|e| failed(e, out))?;
                if done < len {
                    crate::sys::advise_sequential(file);
                    if buffer.is_empty() {
                        buffer = vec![0u8; super::BUFFER];
                    }
                }
                while done < len {
                    let n = (len - done).min(buffer.len() as u64) as usize;
                    crate::sys::read_exact_at(file, &mut buffer[..n], offset + done)
                        .map_err(|e| name.io_error("read", e))?;
                    out.write_all(&buffer[..n]).map_err(|e| failed(e, out))?;
                    done += n as u64;
                }
                progress(len);
            }
        }
    }
    Ok(())
}
