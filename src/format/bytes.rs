//! Reading a header from its bytes alone, for an object read by range (`input/objects.rs`):
//! each format's pure parser (.npy, safetensors, GGUF) behind one entry, which says how many
//! more bytes it needs, or that the format is not parsed from bytes; and the readers of
//! ZIP archives and `torch.save` pickles over a source read by range ([`Format::read_ranged`]).

use std::io;

use super::zip::ReadRange;
use super::{Contents, Format, Found, gguf, keep_selected, npy, pickle, safetensors, zip};
use crate::error::{InputRef, Result};

/// What reading a header from its bytes gives ([`Format::read_bytes`]).
pub enum FromBytes {
    /// The tensors it declares.
    Read(Contents),
    /// It needs this many bytes in all, from the file's first.
    Need(u64),
    /// The format's header is not parsed from bytes (yet): read the file as a local one.
    NoParser,
}

impl Format {
    /// Reads the tensors a file of this format declares from its first `bytes` alone (of a
    /// file `len` bytes long: an object read by range), as [`Format::read`] reads a file:
    /// the contents, [`FromBytes::Need`] of more bytes, or [`FromBytes::NoParser`] for a
    /// format whose header is not parsed from bytes (JSON text, ZIP archives, pickles: those
    /// but JSON are read by range, [`Format::read_ranged`]).
    pub fn read_bytes(
        self,
        bytes: &[u8],
        len: u64,
        name: &InputRef,
        select: Option<&str>,
    ) -> Result<FromBytes> {
        let read = if self == Format::Npy {
            match npy::parse_header(bytes) {
                Err(npy::Parse::Need(needed)) if needed <= len => {
                    return Ok(FromBytes::Need(needed));
                }
                // The reader's own checks of the file's length, and its refusals.
                _ => npy::read_header(
                    npy::HeaderBytes {
                        head: bytes,
                        rest: &mut io::empty(),
                        start: 0,
                        len,
                        // An object has no append under way: bytes past the data are damage.
                        past_end: npy::PastEnd::Malformed,
                    },
                    name,
                )
                .map(|info| {
                    Ok(Contents::of_tensors(vec![Found {
                        name: None,
                        info,
                        file: None,
                        stored_crc: None,
                    }]))
                })?,
            }
        } else if self == Format::SafeTensors && !zip::is_archive(bytes) {
            safetensors::read_bytes(bytes, len, name)?
        } else if self == Format::Gguf {
            gguf::read_bytes(bytes, len, name, select)?
        } else {
            return Ok(FromBytes::NoParser);
        };
        let mut contents = match read {
            Ok(contents) => contents,
            Err(needed) => return Ok(FromBytes::Need(needed)),
        };
        keep_selected(&mut contents, select, name)?;
        Ok(FromBytes::Read(contents))
    }
}

impl Format {
    /// Reads the tensors a file of this format declares from `source`, read by position (a
    /// remote object: each read a ranged request), for the formats whose headers are not
    /// parsed from bytes alone: ZIP archives (.npz, `torch.save`'s ZIP form; the directory at
    /// the end, each member's header, a pickle) and `torch.save`'s legacy form (its pickles
    /// from the start). `head` is the file's first bytes, `len` its length. As
    /// [`Format::read`] does, but no tensor's data is read, but for a strided `.pt` view
    /// (gathered into `spill`, up to 256 MiB read into memory) -- `None` for a format read
    /// from neither (JSON text), which is read as a local file.
    pub fn read_ranged(
        self,
        (source, len, head): (&dyn ReadRange, u64, &[u8]),
        name: &InputRef,
        select: Option<&str>,
    ) -> Result<Option<Contents>> {
        let mut contents = match self.as_archive(head) {
            Some(archive) => super::read_archive(self, archive, (source, len, head), name, select)?,
            None if self == Format::PyTorch => {
                pickle::read_unzipped(source, (len, head), name, select)?
            }
            None => return Ok(None),
        };
        keep_selected(&mut contents, select, name)?;
        Ok(Some(contents))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::dtype::DType;
    use crate::format::Layout;

    fn name() -> InputRef {
        InputRef {
            position: 1,
            location: Path::new("s3://b/x").into(),
            tensor: None,
        }
    }

    /// Asks for more until `file`'s header is there, as the driver does; how many asks.
    fn read_growing(format: Format, file: &[u8]) -> (Contents, usize) {
        let mut have = 1;
        let mut asks = 0;
        loop {
            match format.read_bytes(&file[..have], file.len() as u64, &name(), None) {
                Ok(FromBytes::Read(contents)) => return (contents, asks),
                Ok(FromBytes::Need(needed)) => {
                    assert!(needed as usize > have && needed as usize <= file.len());
                    have = needed as usize;
                    asks += 1;
                }
                Ok(FromBytes::NoParser) => panic!("no parser for {format:?}"),
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn an_npy_header_is_read_from_bytes_asking_for_more() {
        let mut file = crate::format::npy::header(&DType::Float32, &[2, 3], Layout::C).unwrap();
        file.extend_from_slice(&[0; 24]);
        let (contents, asks) = read_growing(Format::Npy, &file);
        assert!(asks >= 1);
        let info = &contents.tensors[0].info;
        assert_eq!((&*info.shape, info.data_len), (&[2, 3][..], 24));
        // A truncated object is refused by the reader's own check, naming it.
        let short = Format::Npy.read_bytes(
            &file[..file.len() - 4],
            file.len() as u64 - 4,
            &name(),
            None,
        );
        assert!(short.err().unwrap().to_string().contains("truncated"));
    }

    #[test]
    fn a_safetensors_header_is_read_from_bytes_and_a_tensor_selected() {
        let text = br#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[1],"data_offsets":[8,9]}}"#;
        let mut file = (text.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(text);
        file.extend_from_slice(&[0; 9]);
        let (contents, asks) = read_growing(Format::SafeTensors, &file);
        assert_eq!((contents.tensors.len(), asks), (2, 2));
        let len = file.len() as u64;
        let Ok(FromBytes::Read(one)) =
            Format::SafeTensors.read_bytes(&file, len, &name(), Some("b"))
        else {
            panic!("b not read");
        };
        assert_eq!(one.tensors[0].info.data_offset, 8 + text.len() as u64 + 8);
        let missing = Format::SafeTensors.read_bytes(&file, len, &name(), Some("c"));
        assert!(missing.is_err());
    }

    #[test]
    fn formats_without_a_parser_from_bytes_say_so() {
        let zip = b"PK\x03\x04rest of an archive";
        for format in [
            Format::Npz,
            Format::PyTorch,
            Format::Json,
            Format::SafeTensors,
        ] {
            let read = format
                .read_bytes(zip, zip.len() as u64, &name(), None)
                .unwrap();
            assert!(matches!(read, FromBytes::NoParser), "{format:?}");
        }
    }
}
