//! Fuzz target: the packet decoder (`pipefence::command::decode`) over random words: every
//! packet decodes or is a `DecodeError`, never a panic, and decoding walks forward.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let words: Vec<u32> = data
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let mut offset = 0;
        while offset < words.len() {
            match pipefence::command::decode(&words, offset) {
                Ok((_, len)) => {
                    assert!(len > 0, "a packet of length 0 at {offset}");
                    offset += len;
                }
                Err(_) => break,
            }
        }
        let _ = pipefence::command::decode_all(&words);
    });
}
