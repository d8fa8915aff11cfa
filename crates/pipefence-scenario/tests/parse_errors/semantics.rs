//! Diagnostics of the language: unknown, duplicate, missing and out-of-range names, properties and values, rules that close() checks.

use super::*;

/// Unknown node names: at top level, in a list, in a host block, and a `cpu-wait-multiple` child (a fence name).
#[test]
fn unknown_node() {
    check(
        r#"
buffer flags size=64 heap=shared
bufer data size=16
list a kind=direct {
    write-value32-topp flags value=1
}
host h {
    slep ms=1
}
cpu-wait-multiple {
    nope 1
}
"#,
        r#"
t.kdl:2:1: unknown node `bufer`; did you mean `buffer`?
 2 | bufer data size=16
   | ^
t.kdl:4:5: unknown command `write-value32-topp`; did you mean `write-value32-top`?
 4 |     write-value32-topp flags value=1
   |     ^
t.kdl:7:5: unknown action `slep` in host `h`; did you mean `sleep`?
 7 |     slep ms=1
   |     ^
t.kdl:10:5: unknown fence `nope`
10 |     nope 1
   |     ^
"#,
    );
}

/// "Did you mean": a name close to a known one (properties, node names, commands, host actions,
/// declared buffers, fences, queues and lists, and enum values: heaps, comparisons, kernels) is
/// suggested; a far one gets the list of known names (or nothing, for declared names). A
/// required property reported as misspelled is not reported missing as well.
#[test]
fn did_you_mean_suggests_only_close_names() {
    check(
        r#"
buffer data size=64 heap=shard
fence done
queue gfx kind=direct
queue cmp kind=compte
list work kind=direct {
    wait-value32 data cmp=greater-eqaul reference=1
    dispatch fil dst=data groups=1 value=1
    dispatch fill dst=dat groups=1 value=1
    dispatch fill dst="dta+4" groups=1 value=1
}
execute gfxx work
execute gfx wrok
signal gfx doen 1
signal gfx zzzzzz 1
cpu-write data valeu=1
cpu-write data width=32 xyzzy=1
"#,
        r#"
t.kdl:1:21: unknown heap `shard`; did you mean `shared`?
 1 | buffer data size=64 heap=shard
   |                     ^
t.kdl:4:11: unknown kind `compte`; did you mean `compute`?
 4 | queue cmp kind=compte
   |           ^
t.kdl:6:23: unknown comparison `greater-eqaul`; did you mean `greater-equal`?
 6 |     wait-value32 data cmp=greater-eqaul reference=1
   |                       ^
t.kdl:7:14: unknown kernel `fil`; did you mean `fill`?
 7 |     dispatch fil dst=data groups=1 value=1
   |              ^
t.kdl:8:19: unknown buffer `dat`; did you mean `data`?
 8 |     dispatch fill dst=dat groups=1 value=1
   |                   ^
t.kdl:9:19: unknown buffer `dta` in address `dta+4`; did you mean `data`?
 9 |     dispatch fill dst="dta+4" groups=1 value=1
   |                   ^
t.kdl:11:9: unknown queue `gfxx`; did you mean `gfx`?
11 | execute gfxx work
   |         ^
t.kdl:12:13: unknown list `wrok`; did you mean `work`?
12 | execute gfx wrok
   |             ^
t.kdl:13:12: unknown fence `doen`; did you mean `done`?
13 | signal gfx doen 1
   |            ^
t.kdl:14:12: unknown fence `zzzzzz`
14 | signal gfx zzzzzz 1
   |            ^
t.kdl:15:16: unknown property `valeu` on `cpu-write`; did you mean `value`?
15 | cpu-write data valeu=1
   |                ^
t.kdl:16:1: missing required property `value` on `cpu-write`
16 | cpu-write data width=32 xyzzy=1
   | ^
t.kdl:16:25: unknown property `xyzzy` on `cpu-write` (expected one of: value, width)
16 | cpu-write data width=32 xyzzy=1
   |                         ^
"#,
    );
}

/// Unknown and duplicate properties, each at the property's own position.
#[test]
fn unknown_and_duplicate_property() {
    check(
        r#"
buffer flags size=64 heap=shared
list a kind=direct {
    write-value32-top flags vaule=1
    write-value32-top flags value=1 value=2
    end-event label="x"
}
"#,
        r#"
t.kdl:3:29: unknown property `vaule` on `write-value32-top`; did you mean `value`?
3 |     write-value32-top flags vaule=1
  |                             ^
t.kdl:4:37: duplicate property `value` on `write-value32-top` (first given at 4:29)
4 |     write-value32-top flags value=1 value=2
  |                                     ^
t.kdl:5:5: end-event has no open begin-event to close
5 |     end-event label="x"
  |     ^
t.kdl:5:15: unknown property `label` on `end-event` (it takes no properties)
5 |     end-event label="x"
  |               ^
"#,
    );
}

/// Missing required properties and arguments, and an extra argument.
#[test]
fn missing_required_property_or_argument() {
    check(
        r#"
buffer flags heap=shared
queue q
fence f 1
signal q f
cpu-poll flags reference=1
"#,
        r#"
t.kdl:1:1: missing required property `size` on `buffer`
1 | buffer flags heap=shared
  | ^
t.kdl:2:1: missing required property `kind` on `queue`
2 | queue q
  | ^
t.kdl:3:9: unexpected argument `1` to `fence` (usage: fence NAME)
3 | fence f 1
  |         ^
t.kdl:4:1: `signal` is missing its VALUE argument (usage: signal QUEUE FENCE VALUE)
4 | signal q f
  | ^
t.kdl:5:1: missing required property `cmp` on `cpu-poll`
5 | cpu-poll flags reference=1
  | ^
"#,
    );
}

/// Negative, too large, float and malformed numbers (also inside an address and a string).
#[test]
fn bad_number() {
    check(
        r#"
buffer flags size=64 heap=shared
fence f initial=-1
cpu-signal f 18446744073709551616
sleep ms=1.5
cpu-write "flags+0xZ" value=1
expect flags equals="12a"
"#,
        r#"
t.kdl:2:9: bad number `-1` for `initial` (expected an unsigned 64-bit integer, decimal or 0x hex)
2 | fence f initial=-1
  |         ^
t.kdl:3:14: bad number `18446744073709551616` for VALUE (expected an unsigned 64-bit integer, decimal or 0x hex)
3 | cpu-signal f 18446744073709551616
  |              ^
t.kdl:4:7: bad number `1.5` for `ms` (expected an unsigned 64-bit integer, decimal or 0x hex)
4 | sleep ms=1.5
  |       ^
t.kdl:5:11: bad offset `0xZ` in address `flags+0xZ` (expected an unsigned 64-bit integer, decimal or 0x hex)
5 | cpu-write "flags+0xZ" value=1
  |           ^
t.kdl:6:14: bad number `12a` for `equals` (expected an unsigned 64-bit integer, decimal or 0x hex)
6 | expect flags equals="12a"
  |              ^
"#,
    );
}

/// A `value`, `reference` or `mask` wider than the node's width; for list commands the library's own rule reports it.
#[test]
fn value_wider_than_width() {
    check(
        r#"
buffer flags size=64 heap=shared
cpu-write flags value=0x100000000
cpu-write flags value=0x100000000 width=64
cpu-poll flags cmp=equal reference=1 mask=0x1ffffffff
expect flags width=64 cmp=less reference=1 mask=0xffffffffffffffff
list a kind=direct {
    write-immediate flags value=4294967296
    wait-value32 flags cmp=equal reference=0x100000000
}
"#,
        r#"
t.kdl:2:17: `value` 0x100000000 is wider than 32 bits (the node's width)
2 | cpu-write flags value=0x100000000
  |                 ^
t.kdl:4:38: `mask` 0x1ffffffff is wider than 32 bits (the node's width)
4 | cpu-poll flags cmp=equal reference=1 mask=0x1ffffffff
  |                                      ^
t.kdl:7:27: `value` 4294967296 does not fit in 32 bits
7 |     write-immediate flags value=4294967296
  |                           ^
t.kdl:8:5: reference 0x100000000 does not fit a 32-bit wait (above 0xffffffff)
8 |     wait-value32 flags cmp=equal reference=0x100000000
  |     ^
"#,
    );
}

/// Unknown fences, lists and buffers.
#[test]
fn unknown_name() {
    check(
        r#"
fence frame
queue gfx kind=direct
signal gfx fram 1
execute gfx produce
expect-fence frames equals=1
cpu-write "flag+8" value=1
"#,
        r#"
t.kdl:3:12: unknown fence `fram`; did you mean `frame`?
3 | signal gfx fram 1
  |            ^
t.kdl:4:13: unknown list `produce`
4 | execute gfx produce
  |             ^
t.kdl:5:14: unknown fence `frames`; did you mean `frame`?
5 | expect-fence frames equals=1
  |              ^
t.kdl:6:11: unknown buffer `flag` in address `flag+8`
6 | cpu-write "flag+8" value=1
  |           ^
"#,
    );
}

/// Duplicate names (per kind: a queue may share a buffer's name).
#[test]
fn duplicate_name() {
    check(
        r#"
buffer data size=16
fence done
buffer data size=32
fence "done"
queue data kind=copy
"#,
        r#"
t.kdl:3:8: duplicate buffer `data` (first declared at 1:1)
3 | buffer data size=32
  |        ^
t.kdl:4:7: duplicate fence `done` (first declared at 2:1)
4 | fence "done"
  |       ^
"#,
    );
}

/// A name used before its declaration is unknown there.
#[test]
fn use_before_declaration() {
    check(
        r#"
queue gfx kind=direct
execute gfx produce
list produce kind=direct {
    write-value32-top flags value=1
}
buffer flags size=64 heap=shared
execute gfx produce
"#,
        r#"
t.kdl:2:13: unknown list `produce`
2 | execute gfx produce
  |             ^
t.kdl:4:23: unknown buffer `flags`
4 |     write-value32-top flags value=1
  |                       ^
"#,
    );
}

/// A buffer larger than the device creates (64 GiB) is refused where its size is written,
/// not created as a 4-byte stand-in after a host error at run time (which then faulted "252
/// bytes past the end" of it). The largest size is accepted.
#[test]
fn buffer_larger_than_the_device_creates() {
    check(
        r#"
buffer big size=0x1000000004
buffer huge size=0xFFFFFFFFFFFFFFFC
buffer ok size=0x1000000000
"#,
        r#"
t.kdl:1:12: `size` 0x1000000004 is above the largest buffer the device creates (68719476736 bytes, 64 GiB)
1 | buffer big size=0x1000000004
  |            ^
t.kdl:2:13: `size` 0xFFFFFFFFFFFFFFFC is above the largest buffer the device creates (68719476736 bytes, 64 GiB)
2 | buffer huge size=0xFFFFFFFFFFFFFFFC
  |             ^
"#,
    );
}

/// Addresses plus their access width, a copy's range, an `expect`'s `count` elements, a kernel's start.
#[test]
fn address_outside_buffer() {
    check(
        r#"
buffer flags size=64 heap=shared
list a kind=direct {
    write-value64-bop "flags+64" value=1
    write-value64-bop "flags+56" value=1
    copy dst=flags src="flags+0x20" bytes=64
    dispatch fill dst="flags+64" groups=1 value=0
}
expect "flags+60" width=64 equals=0
expect flags count=17 equals=0
expect flags cmp=equal reference-at="flags+8" count=16
"#,
        r#"
t.kdl:3:23: address `flags+64` (8 bytes) is outside buffer `flags` (64 bytes)
 3 |     write-value64-bop "flags+64" value=1
   |                       ^
t.kdl:5:20: address `flags+0x20` (64 bytes) is outside buffer `flags` (64 bytes)
 5 |     copy dst=flags src="flags+0x20" bytes=64
   |                    ^
t.kdl:6:19: address `flags+64` (4 bytes) is outside buffer `flags` (64 bytes)
 6 |     dispatch fill dst="flags+64" groups=1 value=0
   |                   ^
t.kdl:8:8: address `flags+60` (8 bytes) is outside buffer `flags` (64 bytes)
 8 | expect "flags+60" width=64 equals=0
   |        ^
t.kdl:9:8: address `flags` (68 bytes) is outside buffer `flags` (64 bytes)
 9 | expect flags count=17 equals=0
   |        ^
t.kdl:10:24: address `flags+8` (64 bytes) is outside buffer `flags` (64 bytes)
10 | expect flags cmp=equal reference-at="flags+8" count=16
   |                        ^
"#,
    );
}

/// A list executed on a queue of another kind (Q1).
#[test]
fn list_on_queue_of_another_kind() {
    check(
        r#"
queue gfx kind=direct
queue async kind=compute
list produce kind=direct { }
list consume kind=compute { }
execute gfx produce consume
execute async consume
"#,
        r#"
t.kdl:5:21: list `consume` is a compute list; queue `gfx` is direct
5 | execute gfx produce consume
  |                     ^
"#,
    );
}

/// `cpu-write` to device-local or readback memory and `cpu-poll` of device-local memory (M1); `expect` reads any heap.
#[test]
fn cpu_access_against_heap_rules() {
    check(
        r#"
buffer data size=16
buffer rb size=16 heap=readback
buffer up size=16 heap=upload
cpu-write data value=1
cpu-write rb value=1
cpu-write up value=1
cpu-poll data cmp=equal reference=1
cpu-poll rb cmp=equal reference=1
expect data equals=0
"#,
        r#"
t.kdl:4:1: `cpu-write` to buffer `data` (device-local heap) is not allowed: the CPU writes only upload and shared buffers (M1)
4 | cpu-write data value=1
  | ^
t.kdl:5:1: `cpu-write` to buffer `rb` (readback heap) is not allowed: the CPU writes only upload and shared buffers (M1)
5 | cpu-write rb value=1
  | ^
t.kdl:7:1: `cpu-poll` of buffer `data` (device-local heap) is not allowed: the CPU reads only upload, readback and shared buffers (M1)
7 | cpu-poll data cmp=equal reference=1
  | ^
"#,
    );
}

/// `host` blocks do not nest, and hold no declarations.
#[test]
fn nested_host() {
    check(
        r#"
fence f
host outer {
    cpu-signal f 1
    host inner {
        cpu-signal f 2
    }
    fence g
    expect-removed reason=hung
}
"#,
        r#"
t.kdl:4:5: `host` blocks do not nest (this one is inside host `outer`)
4 |     host inner {
  |     ^
t.kdl:7:5: `fence` is only allowed at top level, not inside host `outer`
7 |     fence g
  |     ^
t.kdl:8:5: `expect-removed` is only allowed at top level, not inside host `outer`
8 |     expect-removed reason=hung
  |     ^
"#,
    );
}

/// Commands that `CommandList::close()` rejects (C2, C11, C10, C6, C3, Q1), at their own lines, with addresses as written.
#[test]
fn commands_that_close_rejects() {
    check(
        r#"
buffer flags size=64 heap=shared
list a kind=compute {
    wait-value32 flags cmp=less reference=1 engine=pfp
    wait-value64 "flags+2" cmp=greater-equal reference=1
    end-event
    dispatch sum src=flags dst="flags+4" groups=0
    write-value64-top flags value=1 source=gpu-timestamp
}
list b kind=copy {
    flush-pipeline
    begin-event "open"
}
"#,
        r#"
t.kdl:3:5: comparison `less` is not allowed on the pre-fetch parser (pfp waits accept only greater-equal)
 3 |     wait-value32 flags cmp=less reference=1 engine=pfp
   |     ^
t.kdl:4:5: address `flags+2` is not 8-byte aligned (64-bit wait)
 4 |     wait-value64 "flags+2" cmp=greater-equal reference=1
   |     ^
t.kdl:5:5: end-event has no open begin-event to close
 5 |     end-event
   |     ^
t.kdl:6:5: group count 0: a dispatch needs at least 1 group
 6 |     dispatch sum src=flags dst="flags+4" groups=0
   |     ^
t.kdl:6:5: sum destination `flags+4` is not 8-byte aligned (it is a u64)
 6 |     dispatch sum src=flags dst="flags+4" groups=0
   |     ^
t.kdl:7:5: value 0x1 must be 0 with source `gpu-timestamp` (the timestamp is written instead)
 7 |     write-value64-top flags value=1 source=gpu-timestamp
   |     ^
t.kdl:10:5: flush-pipeline is not allowed in a copy list (the DMA engine has no pipeline to flush)
10 |     flush-pipeline
   |     ^
t.kdl:11:5: begin-event "open" is never closed by an end-event
11 |     begin-event "open"
   |     ^
"#,
    );
}

/// Every mistake of a file is reported, sorted by position.
#[test]
fn several_errors_all_reported() {
    check(
        r#"
device fifo-depth=0
buffer data size=15
fence done
queue gfx kind=direct
list produce kind=direct {
    write-value32-bop data value=1 flush="l2-writeback l3-magic"
    wait-value32 data cmp=bigger reference=1
}
execute gfx produce
cpu-wait done 1 timeout=5
expect-removed reason=hung
expect-removed reason=page-fault
"#,
        r#"
t.kdl:1:8: `fifo-depth` 0 is out of range (expected 1 to 65536)
 1 | device fifo-depth=0
   |        ^
t.kdl:2:13: `size` 15 is not a positive multiple of 4
 2 | buffer data size=15
   |             ^
t.kdl:6:36: unknown flush flag `l3-magic` (expected some of: l1-invalidate l1-volatile l2-invalidate l2-volatile l2-writeback)
 6 |     write-value32-bop data value=1 flush="l2-writeback l3-magic"
   |                                    ^
t.kdl:7:23: unknown comparison `bigger` (expected one of: never, less, equal, less-equal, greater, not-equal, greater-equal, always)
 7 |     wait-value32 data cmp=bigger reference=1
   |                       ^
t.kdl:10:17: unknown property `timeout` on `cpu-wait` (expected one of: timeout-ms)
10 | cpu-wait done 1 timeout=5
   |                 ^
t.kdl:12:1: duplicate `expect-removed` (first given at 11:1)
12 | expect-removed reason=page-fault
   | ^
"#,
    );
}

/// A command with one wrong value still has the others checked by the library's rules (the
/// alignment of its address, a value too wide for its write, a comparison the engine does not
/// have), each mistake once: the wrong value stands in as one that no rule rejects. A wrong
/// `source` leaves the value's rule unknown (it must be 0 with a timestamp), so it is not
/// checked; a wrong kernel leaves its operands unread, but not the dispatch's own rules.
#[test]
fn a_command_with_a_wrong_value_has_its_other_values_checked() {
    check(
        r#"
buffer data size=64
queue dma kind=copy
list l kind=direct {
    write-value32-bop "data+2" value=1 flush="l2-writeback bogus"
    write-value32-top data value=0x100000000 source=clock
    write-value32-bop data value=0x100000000 flush=bogus
    wait-value32 "data+4" cmp=equal reference=0x100000000 engine=xyz
    dispatch blur groups=0
    copy dst="data+2" src=nowhere bytes=4
}
list c kind=copy {
    flush-pipeline flush=bogus
}
"#,
        r#"
t.kdl:4:5: address `data+2` is not 4-byte aligned (32-bit write)
 4 |     write-value32-bop "data+2" value=1 flush="l2-writeback bogus"
   |     ^
t.kdl:4:40: unknown flush flag `bogus` (expected some of: l1-invalidate l1-volatile l2-invalidate l2-volatile l2-writeback)
 4 |     write-value32-bop "data+2" value=1 flush="l2-writeback bogus"
   |                                        ^
t.kdl:5:46: unknown source `clock` (expected one of: value, gpu-timestamp, system-timestamp)
 5 |     write-value32-top data value=0x100000000 source=clock
   |                                              ^
t.kdl:6:5: value 0x100000000 does not fit a 32-bit write (above 0xffffffff)
 6 |     write-value32-bop data value=0x100000000 flush=bogus
   |     ^
t.kdl:6:46: unknown flush flag `bogus` (expected some of: l1-invalidate l1-volatile l2-invalidate l2-volatile l2-writeback)
 6 |     write-value32-bop data value=0x100000000 flush=bogus
   |                                              ^
t.kdl:7:5: reference 0x100000000 does not fit a 32-bit wait (above 0xffffffff)
 7 |     wait-value32 "data+4" cmp=equal reference=0x100000000 engine=xyz
   |     ^
t.kdl:7:59: unknown engine `xyz` (expected one of: me, pfp)
 7 |     wait-value32 "data+4" cmp=equal reference=0x100000000 engine=xyz
   |                                                           ^
t.kdl:8:5: group count 0: a dispatch needs at least 1 group
 8 |     dispatch blur groups=0
   |     ^
t.kdl:8:14: unknown kernel `blur` (expected one of: fill, add, sum, spin)
 8 |     dispatch blur groups=0
   |              ^
t.kdl:9:5: destination `data+2` is not 4-byte aligned
 9 |     copy dst="data+2" src=nowhere bytes=4
   |     ^
t.kdl:9:23: unknown buffer `nowhere`
 9 |     copy dst="data+2" src=nowhere bytes=4
   |                       ^
t.kdl:12:5: flush-pipeline is not allowed in a copy list (the DMA engine has no pipeline to flush)
12 |     flush-pipeline flush=bogus
   |     ^
t.kdl:12:20: unknown flush flag `bogus` (expected some of: l1-invalidate l1-volatile l2-invalidate l2-volatile l2-writeback)
12 |     flush-pipeline flush=bogus
   |                    ^
"#,
    );
}

/// A declaration without its name is one mistake: the uses of that kind of name (the buffer
/// and fence the file meant) are not reported as unknown too. Other kinds still are.
#[test]
fn a_declaration_without_a_name_is_reported_once() {
    check(
        r#"
buffer size=64
fence
queue q kind=compute
list l kind=compute {
    dispatch fill dst=data groups=1 value=1
    copy dst="data+4" src=data bytes=4
}
signal q f 1
cpu-write data value=1
execute q other
"#,
        r#"
t.kdl:1:1: `buffer` is missing its NAME argument (usage: buffer NAME)
 1 | buffer size=64
   | ^
t.kdl:2:1: `fence` is missing its NAME argument (usage: fence NAME)
 2 | fence
   | ^
t.kdl:10:11: unknown list `other`
10 | execute q other
   |           ^
"#,
    );
}
