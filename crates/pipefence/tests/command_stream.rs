//! Property tests of the packet format (D2): every command round-trips through the encoder and
//! the decoder, and the decoder never panics on arbitrary or corrupted words.

use pipefence::command::{
    decode, decode_all, encode, encode_into, Command, Comparison, Flush, ImmediateMode,
    ImmediateWrite, KernelArgs, WaitEngine, Width, WriteSource,
};
use proptest::prelude::*;
use proptest::sample::{select, Index};

/// Any u64, with the edges and small values over-represented.
fn u64s() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => any::<u64>(),
        1 => Just(0u64),
        1 => Just(u64::MAX),
        1 => 0..=u64::from(u32::MAX) + 1,
    ]
}

/// Any u32, with the edges over-represented.
fn u32s() -> impl Strategy<Value = u32> {
    prop_oneof![3 => any::<u32>(), 1 => Just(0u32), 1 => Just(u32::MAX), 1 => 0u32..8]
}

fn width() -> impl Strategy<Value = Width> {
    select(vec![Width::W32, Width::W64])
}

fn comparison() -> impl Strategy<Value = Comparison> {
    select(Comparison::ALL.to_vec())
}

fn engine() -> impl Strategy<Value = WaitEngine> {
    select(vec![WaitEngine::Me, WaitEngine::Pfp])
}

fn source() -> impl Strategy<Value = WriteSource> {
    select(vec![
        WriteSource::Value,
        WriteSource::GpuTimestamp,
        WriteSource::SystemTimestamp,
    ])
}

fn mode() -> impl Strategy<Value = ImmediateMode> {
    select(vec![
        ImmediateMode::Default,
        ImmediateMode::MarkerIn,
        ImmediateMode::MarkerOut,
    ])
}

/// Any flush bits, defined or not.
fn flush() -> impl Strategy<Value = Flush> {
    prop_oneof![0u32..32, any::<u32>()].prop_map(Flush)
}

/// A label of 0..40 arbitrary Unicode scalar values.
fn label() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..40).prop_map(|chars| chars.into_iter().collect())
}

fn kernel() -> impl Strategy<Value = KernelArgs> {
    prop_oneof![
        (u64s(), u32s()).prop_map(|(dst, value)| KernelArgs::Fill { dst, value }),
        (u64s(), u64s(), u32s()).prop_map(|(dst, src, value)| KernelArgs::Add { dst, src, value }),
        (u64s(), u64s()).prop_map(|(dst, src)| KernelArgs::Sum { dst, src }),
        u64s().prop_map(|ns| KernelArgs::Spin { ns }),
        u32s().prop_map(|index| KernelArgs::User { index }),
    ]
}

/// Any command: every variant, every enum value, any operand (invalid ones included).
fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        (u64s(), width(), comparison(), u64s(), u64s(), engine()).prop_map(
            |(address, width, cmp, reference, mask, engine)| Command::WaitValue {
                address,
                cond: pipefence::ValueCondition {
                    width,
                    cmp,
                    reference,
                    mask
                },
                engine
            }
        ),
        (u64s(), width(), u64s(), flush(), source()).prop_map(
            |(address, width, value, flush, source)| Command::WriteValueBottomOfPipe {
                address,
                width,
                value,
                flush,
                source,
            }
        ),
        (u64s(), width(), u64s(), source()).prop_map(|(address, width, value, source)| {
            Command::WriteValueTopOfPipe {
                address,
                width,
                value,
                source,
            }
        }),
        prop::collection::vec(
            (u64s(), u32s(), mode()).prop_map(|(address, value, mode)| ImmediateWrite {
                address,
                value,
                mode,
            }),
            1..5
        )
        .prop_map(|writes| Command::WriteImmediate { writes }),
        flush().prop_map(|flush| Command::FlushPipeline { flush }),
        (kernel(), u32s()).prop_map(|(kernel, groups)| Command::Dispatch { kernel, groups }),
        (kernel(), u64s()).prop_map(|(kernel, args)| Command::DispatchIndirect { kernel, args }),
        (u64s(), u64s(), u64s()).prop_map(|(dst, src, bytes)| Command::Copy { dst, src, bytes }),
        label().prop_map(|label| Command::SetMarker { label }),
        label().prop_map(|label| Command::BeginEvent { label }),
        Just(Command::EndEvent),
    ]
}

/// A stream word: arbitrary, small, or shaped like a header (an opcode near the assigned ones
/// and a short length), so that random streams get past the header checks often.
///
/// One `u64` picks the shape and supplies the bits: a union of strategies per word is an order
/// of magnitude slower to generate in debug builds, and this test runs 100 000 cases.
fn word() -> impl Strategy<Value = u32> {
    any::<u64>().prop_map(|r| {
        let low = r as u32;
        match r >> 61 {
            0 | 1 => low,
            2 | 3 => low & 0xf,
            // Mostly the lengths real packets have, sometimes up to 70.
            4..=6 => {
                let max_len = if low >> 31 == 0 { 12 } else { 70 };
                (low % 13) | (((low >> 8) % max_len) << 16)
            }
            _ => u32::MAX,
        }
    })
}

/// Decodes at `offset` and checks what any decode must satisfy: errors name the offset, and a
/// decoded packet lies inside the stream and re-encodes to exactly the words it was read from.
fn check_decode_at(words: &[u32], offset: usize) -> Result<(), TestCaseError> {
    match decode(words, offset) {
        Ok((cmd, len)) => {
            prop_assert!(len >= 1);
            let end = offset.checked_add(len);
            prop_assert!(end.is_some_and(|end| end <= words.len()));
            let consumed = words.get(offset..offset + len).unwrap_or_default();
            let mut again = Vec::new();
            encode_into(&cmd, &mut again);
            prop_assert_eq!(again.as_slice(), consumed, "{:?}", cmd);
        }
        Err(e) => {
            prop_assert_eq!(e.offset, offset);
            let text = e.to_string();
            prop_assert!(
                text.starts_with(&format!("packet at word {offset}: ")),
                "{}",
                text
            );
        }
    }
    Ok(())
}

/// Decodes the whole stream and checks that a success re-encodes to the whole stream.
fn check_decode_all(words: &[u32]) -> Result<(), TestCaseError> {
    match decode_all(words) {
        Ok(cmds) => prop_assert_eq!(encode(&cmds), words),
        Err(e) => prop_assert!(e.offset < words.len()),
    }
    Ok(())
}

/// One corruption of an encoded stream.
#[derive(Debug, Clone)]
enum Mutation {
    /// Flip one bit of one word.
    FlipBit(Index, u32),
    /// Overwrite one word.
    SetWord(Index, u32),
    /// Cut the stream short.
    Truncate(Index),
    /// Insert a word.
    Insert(Index, u32),
    /// Remove a word.
    Remove(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), 0u32..32).prop_map(|(i, bit)| Mutation::FlipBit(i, bit)),
        2 => (any::<Index>(), word()).prop_map(|(i, w)| Mutation::SetWord(i, w)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => (any::<Index>(), word()).prop_map(|(i, w)| Mutation::Insert(i, w)),
        1 => any::<Index>().prop_map(Mutation::Remove),
    ]
}

fn apply(words: &mut Vec<u32>, mutation: &Mutation) {
    if words.is_empty() {
        return;
    }
    match mutation {
        Mutation::FlipBit(i, bit) => {
            let i = i.index(words.len());
            words[i] ^= 1 << bit;
        }
        Mutation::SetWord(i, w) => {
            let i = i.index(words.len());
            words[i] = *w;
        }
        Mutation::Truncate(i) => words.truncate(i.index(words.len())),
        Mutation::Insert(i, w) => {
            let i = i.index(words.len() + 1);
            words.insert(i, *w);
        }
        Mutation::Remove(i) => {
            let i = i.index(words.len());
            words.remove(i);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn d2_every_command_round_trips(
        cmd in command(),
        cmds in prop::collection::vec(command(), 0..12),
    ) {
        let mut words = Vec::new();
        encode_into(&cmd, &mut words);
        prop_assert_eq!(decode(&words, 0), Ok((cmd.clone(), words.len())));

        // A sequence: decode_all gives it back, and each packet decodes at its own offset.
        let stream = encode(&cmds);
        let decoded = decode_all(&stream);
        prop_assert_eq!(decoded.as_ref(), Ok(&cmds));
        let mut offset = 0;
        for expected in &cmds {
            let (got, len) = decode(&stream, offset)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&got, expected);
            offset += len;
        }
        prop_assert_eq!(offset, stream.len());
    }

    #[test]
    fn d2_corrupted_stream_never_panics(
        cmds in prop::collection::vec(command(), 1..8),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut words = encode(&cmds);
        for m in &mutations {
            apply(&mut words, m);
        }
        for offset in 0..=words.len() + 1 {
            check_decode_at(&words, offset)?;
        }
        check_decode_all(&words)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100_000))]

    #[test]
    fn d2_random_words_never_panic_decoder(
        words in prop::collection::vec(word(), 0..64),
        offset in 0usize..70,
    ) {
        check_decode_at(&words, offset)?;
        check_decode_all(&words)?;
    }
}

/// Offsets far past the end, which the random test's range does not reach.
#[test]
fn d2_huge_offsets_are_truncated() {
    let words = encode(&[Command::EndEvent]);
    for offset in [2, usize::MAX / 2, usize::MAX] {
        let e = decode(&words, offset).expect_err("past the end");
        assert_eq!(e.offset, offset);
    }
}
