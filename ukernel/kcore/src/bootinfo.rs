//! Board facts from the flattened device tree QEMU hands the kernel in r3 (bamboo puts
//! it at 0x0180_0000): RAM, CPU and timebase clocks, the first 16550 UART, the UIC
//! interrupt controller, the initrd and the command line.
//!
//! The blob comes from outside the kernel, so it is validated before anything reads it.
//! The `fdt` crate (used for node and property lookup) panics on malformed trees, so
//! `validate` first walks the whole structure block and rules out every input that
//! could reach one of its `unwrap`s, slices or asserts: bad header sizes, unterminated
//! or non-UTF-8 names, properties running past the block, property names outside the
//! strings block, unbalanced or too deep nesting, properties after child nodes, short
//! `#address-cells`/`#size-cells` values, NOP tokens, and '/' in property names (which
//! would let `fdt`'s alias fallback recurse without end). Only then is `fdt` called.
//!
//! Addresses follow the Devicetree Specification v0.4 §2.3.6 (`#address-cells`,
//! `#size-cells`, defaults 2 and 1) and §2.3.8 (`ranges`); numbers of up to four cells
//! are handled, so 36-bit PLB addresses of the 44x work.

use core::fmt;

use fdt::node::FdtNode;
use fdt::Fdt;

const FDT_MAGIC: u32 = 0xd00d_feed;
const HEADER_LEN: usize = 40;
const TOKEN_BEGIN_NODE: u32 = 1;
const TOKEN_END_NODE: u32 = 2;
const TOKEN_PROP: u32 = 3;
const TOKEN_NOP: u32 = 4;
const TOKEN_END: u32 = 9;

/// Deepest node nesting accepted (the root counts as 1). The bamboo tree nests 4 deep;
/// `fdt` itself breaks beyond 63.
pub const MAX_DEPTH: usize = 16;
/// Longest command line kept (what reaches the root task); longer ones are cut at a
/// character boundary and [`BoardInfo::bootargs_len`] tells by how much.
pub use kestrel_abi::BOOTARGS_LEN;
/// Interrupt inputs of one UIC (from `kestrel_ppc440::dcr`).
pub use kestrel_ppc440::dcr::uic::LINES as UIC_LINES;

/// The first enabled node compatible with "ns16550" (or "ns16550a").
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct UartInfo {
    /// CPU physical address of the registers (up to 36 bits on the 44x).
    pub phys: u64,
    /// Input clock from `clock-frequency`, 0 if the tree does not give one.
    pub clock_hz: u32,
    /// First cell of `interrupts`: the UIC input line.
    pub irq: Option<u32>,
}

/// The UIC interrupt controller (compatible "ibm,uic"); the primary one if there are
/// several (the one without an `interrupts` property, i.e. not cascaded).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct UicInfo {
    /// First DCR of the controller (first cell of `dcr-reg`).
    pub dcr_base: u32,
    /// Number of interrupt inputs: always [`UIC_LINES`], the tree does not say.
    pub num_irqs: u32,
}

/// What the kernel needs to know about the board.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BoardInfo {
    /// First region of the first `/memory` node.
    pub mem_base: u64,
    pub mem_size: u64,
    /// `timebase-frequency` of the first CPU (or of `/cpus`).
    pub timebase_hz: u32,
    /// `clock-frequency` of the first CPU (or of `/cpus`), 0 if absent.
    pub cpu_hz: u32,
    pub uart0: Option<UartInfo>,
    pub uic: Option<UicInfo>,
    /// Physical `(start, end)` of the initrd from `/chosen`, end exclusive; `None` when
    /// absent or empty (QEMU sets start == end when no `-initrd` was given).
    pub initrd: Option<(u32, u32)>,
    /// `/chosen/bootargs`, cut to [`BOOTARGS_LEN`] bytes.
    pub bootargs: heapless::String<BOOTARGS_LEN>,
    /// Length of `/chosen/bootargs` before the cut, in bytes (more than `bootargs.len()`
    /// when it was cut).
    pub bootargs_len: usize,
}

/// Why the device tree could not be used.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BootInfoError {
    /// No usable device tree header: bad magic, version below 17, or sizes and offsets
    /// beyond the blob. Check that r3 at entry points to the tree.
    BadBlob,
    /// The device tree's structure block is malformed (bad token, unterminated name,
    /// property outside the block, unbalanced nodes, properties after child nodes).
    BadStructure,
    /// The device tree contains NOP tokens, which this parser does not accept; repack the
    /// tree with `dtc -I dtb -O dtb`.
    Nop,
    /// The device tree nests nodes more than [`MAX_DEPTH`] deep.
    TooDeep,
    /// No usable `/memory` node: missing, or its first `reg` entry is malformed or empty.
    NoMemory,
    /// No CPU node under `/cpus`.
    NoCpu,
    /// The first CPU (and `/cpus`) has no `timebase-frequency`.
    NoTimebase,
    /// A `clock-frequency` or `timebase-frequency` is not one or two cells or exceeds 32 bits.
    BadFrequency,
    /// The ns16550 node's `reg` is missing or does not match its bus's cell sizes.
    BadUartReg,
    /// The UART's address cannot be translated to a CPU address: a parent bus has no
    /// `ranges`, a malformed one, or none that covers the UART.
    UartNotTranslatable,
    /// The "ibm,uic" node has no `dcr-reg` property.
    BadUic,
    /// `/chosen` has only one of `linux,initrd-start`/`-end`, or they are not one or two
    /// cells, are reversed, or lie above 4 GiB.
    BadInitrd,
    /// `/chosen/bootargs` is not UTF-8 text.
    BadBootargs,
}

impl BootInfoError {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::BadBlob => "no valid device tree header (is r3 pointing at the tree?)",
            Self::BadStructure => "device tree structure block is malformed",
            Self::Nop => "device tree contains NOP tokens; repack it with dtc",
            Self::TooDeep => "device tree nests nodes too deep",
            Self::NoMemory => "device tree has no usable /memory reg",
            Self::NoCpu => "device tree has no CPU node under /cpus",
            Self::NoTimebase => "CPU node has no timebase-frequency",
            Self::BadFrequency => "clock or timebase frequency is malformed or above 4 GHz",
            Self::BadUartReg => "ns16550 node has a missing or malformed reg",
            Self::UartNotTranslatable => {
                "ns16550 address cannot be translated through the bus ranges"
            }
            Self::BadUic => "ibm,uic node has no dcr-reg",
            Self::BadInitrd => "/chosen initrd start/end are incomplete, malformed or reversed",
            Self::BadBootargs => "/chosen bootargs is not UTF-8",
        }
    }
}

impl fmt::Display for BootInfoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<fdt::FdtError> for BootInfoError {
    /// `fdt` only reports header problems, which `validate` has already ruled out.
    fn from(e: fdt::FdtError) -> Self {
        match e {
            fdt::FdtError::BadMagic | fdt::FdtError::BadPtr | fdt::FdtError::BufferTooSmall => {
                BootInfoError::BadBlob
            }
        }
    }
}

/// The tree's total size from the first 8 bytes of its header, for building the slice
/// from the pointer in r3. `None` if `header` is shorter or the magic is wrong.
pub fn fdt_total_size(header: &[u8]) -> Option<usize> {
    if be32(header, 0)? != FDT_MAGIC {
        return None;
    }
    usize::try_from(be32(header, 4)?).ok()
}

impl BoardInfo {
    /// Reads the board facts from a flattened device tree blob. Never panics.
    pub fn from_fdt(blob: &[u8]) -> Result<BoardInfo, BootInfoError> {
        let layout = validate(blob)?;
        let fdt = Fdt::new(blob)?;
        let root = fdt.find_node("/").ok_or(BootInfoError::BadStructure)?;

        let (mem_base, mem_size) = memory(&fdt, root)?;
        let (timebase_hz, cpu_hz) = cpu_clocks(&fdt)?;
        let uart0 = uart(&fdt, &layout)?;
        let uic = uic(&fdt)?;
        let (initrd, (bootargs, bootargs_len)) = match fdt.find_node("/chosen") {
            Some(chosen) => (initrd(chosen)?, bootargs(chosen)?),
            None => (None, (heapless::String::new(), 0)),
        };
        Ok(BoardInfo {
            mem_base,
            mem_size,
            timebase_hz,
            cpu_hz,
            uart0,
            uic,
            initrd,
            bootargs,
            bootargs_len,
        })
    }
}

// ---- validation ---------------------------------------------------------------------

/// The two blocks of a validated tree.
struct Layout<'a> {
    structs: &'a [u8],
    strings: &'a [u8],
}

fn be32(b: &[u8], off: usize) -> Option<u32> {
    let bytes = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// `b[start .. start + len]` with every step checked.
fn block(b: &[u8], start: u32, len: u32) -> Option<&[u8]> {
    let start = usize::try_from(start).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    b.get(start..end)
}

/// Header checks (Devicetree Specification §5.2), then a full walk of the structure
/// block (§5.4) enforcing the grammar `fdt` relies on.
fn validate(blob: &[u8]) -> Result<Layout<'_>, BootInfoError> {
    use BootInfoError::{BadBlob, BadStructure};
    let word = |i: usize| be32(blob, i * 4).ok_or(BadBlob);
    if blob.len() < HEADER_LEN || word(0)? != FDT_MAGIC {
        return Err(BadBlob);
    }
    let total = word(1)?;
    let (off_struct, off_strings, off_rsvmap) = (word(2)?, word(3)?, word(4)?);
    let (version, last_comp) = (word(5)?, word(6)?);
    let (size_strings, size_struct) = (word(8)?, word(9)?);
    let total_len = usize::try_from(total).map_err(|_| BadBlob)?;
    if total_len < HEADER_LEN || total_len > blob.len() || version < 17 || last_comp > 17 {
        return Err(BadBlob);
    }
    let blob = &blob[..total_len];
    if off_struct % 4 != 0 || off_rsvmap > total {
        return Err(BadBlob);
    }
    let structs = block(blob, off_struct, size_struct).ok_or(BadBlob)?;
    let strings = block(blob, off_strings, size_strings).ok_or(BadBlob)?;
    let layout = Layout { structs, strings };

    let mut depth = 0usize;
    let mut props_allowed = false;
    let mut root_closed = false;
    let mut walker = Walker::new(&layout);
    for token in &mut walker {
        let token = token?;
        if root_closed {
            return Err(BadStructure);
        }
        match token {
            Token::Begin(name) => {
                if (depth == 0) != name.is_empty() {
                    return Err(BadStructure);
                }
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(BootInfoError::TooDeep);
                }
                props_allowed = true;
            }
            Token::Prop(name, value) => {
                if depth == 0 || !props_allowed || name.is_empty() || name.contains('/') {
                    return Err(BadStructure);
                }
                if matches!(name, "#address-cells" | "#size-cells") && value.len() != 4 {
                    return Err(BadStructure);
                }
            }
            Token::End => {
                depth = depth.checked_sub(1).ok_or(BadStructure)?;
                props_allowed = false;
                root_closed = depth == 0;
            }
        }
    }
    // The walk stopped at FDT_END: the root must be closed and nothing may follow.
    if !root_closed || walker.pos != structs.len() {
        return Err(BadStructure);
    }
    Ok(layout)
}

enum Token<'a> {
    Begin(&'a str),
    Prop(&'a str, &'a [u8]),
    End,
}

/// Token iterator over a structure block; ends after `FDT_END` or at the first error.
struct Walker<'a> {
    structs: &'a [u8],
    strings: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Walker<'a> {
    fn new(layout: &Layout<'a>) -> Self {
        Walker {
            structs: layout.structs,
            strings: layout.strings,
            pos: 0,
            done: false,
        }
    }

    fn step(&mut self) -> Result<Option<Token<'a>>, BootInfoError> {
        use BootInfoError::BadStructure;
        let token = be32(self.structs, self.pos).ok_or(BadStructure)?;
        let body = self.pos + 4;
        match token {
            TOKEN_BEGIN_NODE => {
                let name = cstr(self.structs.get(body..).ok_or(BadStructure)?)?;
                self.pos = align4(body + name.len() + 1).ok_or(BadStructure)?;
                Ok(Some(Token::Begin(name)))
            }
            TOKEN_PROP => {
                let len = be32(self.structs, body).ok_or(BadStructure)?;
                let name_off = be32(self.structs, body + 4).ok_or(BadStructure)?;
                let value_start = u32::try_from(body + 8).map_err(|_| BadStructure)?;
                let value = block(self.structs, value_start, len).ok_or(BadStructure)?;
                let name_off = usize::try_from(name_off).map_err(|_| BadStructure)?;
                let name = cstr(self.strings.get(name_off..).ok_or(BadStructure)?)?;
                self.pos = align4(body + 8 + value.len()).ok_or(BadStructure)?;
                Ok(Some(Token::Prop(name, value)))
            }
            TOKEN_END_NODE => {
                self.pos = body;
                Ok(Some(Token::End))
            }
            TOKEN_END => {
                self.pos = body;
                Ok(None)
            }
            TOKEN_NOP => Err(BootInfoError::Nop),
            _ => Err(BadStructure),
        }
    }
}

impl<'a> Iterator for Walker<'a> {
    type Item = Result<Token<'a>, BootInfoError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.step();
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
        }
        r.transpose()
    }
}

fn align4(n: usize) -> Option<usize> {
    Some(n.checked_add(3)? & !3)
}

/// The NUL-terminated UTF-8 string at the start of `b`.
fn cstr(b: &[u8]) -> Result<&str, BootInfoError> {
    let end = b
        .iter()
        .position(|&c| c == 0)
        .ok_or(BootInfoError::BadStructure)?;
    core::str::from_utf8(&b[..end]).map_err(|_| BootInfoError::BadStructure)
}

/// Depth of each node (root = 0), in the same pre-order as `Fdt::all_nodes`.
fn node_depths<'a>(layout: &Layout<'a>) -> impl Iterator<Item = usize> + 'a {
    let mut depth = 0usize;
    Walker::new(layout)
        .map_while(Result::ok)
        .filter_map(move |t| match t {
            Token::Begin(_) => {
                depth += 1;
                Some(depth - 1)
            }
            Token::End => {
                depth = depth.saturating_sub(1);
                None
            }
            Token::Prop(..) => None,
        })
}

// ---- property helpers ---------------------------------------------------------------

/// A big-endian number of `cells` 32-bit cells (at most 4).
fn number(bytes: &[u8], cells: usize) -> Option<u128> {
    if cells > 4 || bytes.len() != cells * 4 {
        return None;
    }
    Some(bytes.chunks_exact(4).fold(0u128, |acc, c| {
        (acc << 32) | u128::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
    }))
}

/// `#address-cells` / `#size-cells` of `node` (for its children), with the defaults.
fn cells(node: FdtNode<'_, '_>, name: &str, default: usize) -> usize {
    match node.property(name).and_then(|p| be32(p.value, 0)) {
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => default,
    }
}

fn address_cells(node: FdtNode<'_, '_>) -> usize {
    cells(node, "#address-cells", 2)
}

fn size_cells(node: FdtNode<'_, '_>) -> usize {
    cells(node, "#size-cells", 1)
}

/// The first `(address, size)` pair of `node`'s `reg`, in its parent bus's cells.
fn first_reg(node: FdtNode<'_, '_>, ac: usize, sc: usize) -> Option<(u128, u128)> {
    let reg = node.property("reg")?.value;
    let a_len = ac.checked_mul(4)?;
    let s_len = sc.checked_mul(4)?;
    let addr = number(reg.get(..a_len)?, ac)?;
    let size = number(reg.get(a_len..a_len.checked_add(s_len)?)?, sc)?;
    Some((addr, size))
}

/// A one- or two-cell integer property that must fit 32 bits.
fn u32_prop(node: FdtNode<'_, '_>, name: &str) -> Option<Result<u32, ()>> {
    let v = node.property(name)?.value;
    let n = match v.len() {
        4 => number(v, 1),
        8 => number(v, 2),
        _ => None,
    };
    Some(n.and_then(|n| u32::try_from(n).ok()).ok_or(()))
}

fn is_enabled(node: FdtNode<'_, '_>) -> bool {
    match node.property("status").and_then(|p| p.as_str()) {
        None => true,
        Some(s) => s == "okay" || s == "ok",
    }
}

fn is_compatible(node: FdtNode<'_, '_>, names: &[&str]) -> bool {
    node.compatible()
        .is_some_and(|c| c.all().any(|s| names.contains(&s)))
}

// ---- the facts ----------------------------------------------------------------------

fn memory(fdt: &Fdt<'_>, root: FdtNode<'_, '_>) -> Result<(u64, u64), BootInfoError> {
    let mem = fdt.find_node("/memory").ok_or(BootInfoError::NoMemory)?;
    let (base, size) =
        first_reg(mem, address_cells(root), size_cells(root)).ok_or(BootInfoError::NoMemory)?;
    let base = u64::try_from(base).map_err(|_| BootInfoError::NoMemory)?;
    let size = u64::try_from(size).map_err(|_| BootInfoError::NoMemory)?;
    if size == 0 || base.checked_add(size).is_none() {
        return Err(BootInfoError::NoMemory);
    }
    Ok((base, size))
}

/// `(timebase_hz, cpu_hz)` of the first CPU; either may be inherited from `/cpus`.
fn cpu_clocks(fdt: &Fdt<'_>) -> Result<(u32, u32), BootInfoError> {
    let cpus = fdt.find_node("/cpus").ok_or(BootInfoError::NoCpu)?;
    let cpu = cpus
        .children()
        .find(|c| {
            c.name.split('@').next() == Some("cpu")
                || c.property("device_type").and_then(|p| p.as_str()) == Some("cpu")
        })
        .ok_or(BootInfoError::NoCpu)?;
    let freq = |name: &str| {
        u32_prop(cpu, name)
            .or_else(|| u32_prop(cpus, name))
            .map(|r| r.map_err(|()| BootInfoError::BadFrequency))
    };
    let timebase = freq("timebase-frequency").ok_or(BootInfoError::NoTimebase)??;
    let clock = freq("clock-frequency").transpose()?.unwrap_or(0);
    Ok((timebase, clock))
}

fn uart(fdt: &Fdt<'_>, layout: &Layout<'_>) -> Result<Option<UartInfo>, BootInfoError> {
    // Ancestors of the current node, by depth (root at 0).
    let mut stack: [Option<FdtNode<'_, '_>>; MAX_DEPTH] = [None; MAX_DEPTH];
    for (node, depth) in fdt.all_nodes().zip(node_depths(layout)) {
        let Some(slot) = stack.get_mut(depth) else {
            return Err(BootInfoError::BadStructure);
        };
        *slot = Some(node);
        if depth == 0 || !is_compatible(node, &["ns16550", "ns16550a"]) || !is_enabled(node) {
            continue;
        }
        let ancestors = &stack[..depth];
        let bus = ancestors[depth - 1].ok_or(BootInfoError::BadStructure)?;
        let (addr, _size) = first_reg(node, address_cells(bus), size_cells(bus))
            .ok_or(BootInfoError::BadUartReg)?;
        let phys = translate(addr, ancestors)?;
        let clock_hz = match u32_prop(node, "clock-frequency") {
            None => 0,
            Some(r) => r.map_err(|()| BootInfoError::BadFrequency)?,
        };
        let irq = node.property("interrupts").and_then(|p| be32(p.value, 0));
        return Ok(Some(UartInfo {
            phys,
            clock_hz,
            irq,
        }));
    }
    Ok(None)
}

/// Translates an address on the bus of `ancestors.last()` into a CPU physical address
/// by applying each bus's `ranges` on the way to the root (Devicetree Specification
/// §2.3.8). An empty `ranges` is the identity; a missing one stops translation.
fn translate(mut addr: u128, ancestors: &[Option<FdtNode<'_, '_>>]) -> Result<u64, BootInfoError> {
    use BootInfoError::UartNotTranslatable as Untranslatable;
    for i in (1..ancestors.len()).rev() {
        let bus = ancestors[i].ok_or(Untranslatable)?;
        let parent = ancestors[i - 1].ok_or(Untranslatable)?;
        let ranges = bus.property("ranges").ok_or(Untranslatable)?.value;
        if ranges.is_empty() {
            continue;
        }
        let (child_ac, parent_ac, sc) =
            (address_cells(bus), address_cells(parent), size_cells(bus));
        if child_ac > 4 || parent_ac > 4 || sc > 4 {
            return Err(Untranslatable);
        }
        let entry = (child_ac + parent_ac + sc) * 4;
        if entry == 0 || ranges.len() % entry != 0 {
            return Err(Untranslatable);
        }
        let mut mapped = None;
        for e in ranges.chunks_exact(entry) {
            let (c, rest) = e.split_at(child_ac * 4);
            let (p, s) = rest.split_at(parent_ac * 4);
            let child = number(c, child_ac).ok_or(Untranslatable)?;
            let size = number(s, sc).ok_or(Untranslatable)?;
            if addr >= child && addr - child < size {
                let base = number(p, parent_ac).ok_or(Untranslatable)?;
                mapped = Some(base.checked_add(addr - child).ok_or(Untranslatable)?);
                break;
            }
        }
        addr = mapped.ok_or(Untranslatable)?;
    }
    u64::try_from(addr).map_err(|_| Untranslatable)
}

fn uic(fdt: &Fdt<'_>) -> Result<Option<UicInfo>, BootInfoError> {
    let is_uic = |n: &FdtNode<'_, '_>| is_compatible(*n, &["ibm,uic"]) && is_enabled(*n);
    let primary = fdt
        .all_nodes()
        .find(|n| is_uic(n) && n.property("interrupts").is_none());
    let Some(node) = primary.or_else(|| fdt.all_nodes().find(is_uic)) else {
        return Ok(None);
    };
    let dcr = node
        .property("dcr-reg")
        .and_then(|p| be32(p.value, 0))
        .ok_or(BootInfoError::BadUic)?;
    Ok(Some(UicInfo {
        dcr_base: dcr,
        num_irqs: UIC_LINES,
    }))
}

fn initrd(chosen: FdtNode<'_, '_>) -> Result<Option<(u32, u32)>, BootInfoError> {
    let start = u32_prop(chosen, "linux,initrd-start");
    let end = u32_prop(chosen, "linux,initrd-end");
    match (start, end) {
        (None, None) => Ok(None),
        (Some(Ok(start)), Some(Ok(end))) if start <= end => Ok(if start == end {
            None
        } else {
            Some((start, end))
        }),
        _ => Err(BootInfoError::BadInitrd),
    }
}

/// The command line, cut to [`BOOTARGS_LEN`] bytes, and its length before the cut.
fn bootargs(
    chosen: FdtNode<'_, '_>,
) -> Result<(heapless::String<BOOTARGS_LEN>, usize), BootInfoError> {
    let mut out = heapless::String::new();
    let Some(prop) = chosen.property("bootargs") else {
        return Ok((out, 0));
    };
    let raw = prop.value.split(|&b| b == 0).next().unwrap_or(&[]);
    let text = core::str::from_utf8(raw).map_err(|_| BootInfoError::BadBootargs)?;
    let mut cut = text.len().min(BOOTARGS_LEN);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    // Cannot fail: at most BOOTARGS_LEN bytes.
    let _ = out.push_str(&text[..cut]);
    Ok((out, text.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    const BAMBOO: &[u8] = include_bytes!("../tests/fixtures/bamboo-qemu.dtb");

    #[test]
    fn parses_qemu_bamboo_tree() {
        let info = BoardInfo::from_fdt(BAMBOO).unwrap();
        assert_eq!(info.mem_base, 0);
        assert_eq!(info.mem_size, 128 << 20);
        // hw/ppc/ppc440_bamboo.c sets both to 400 MHz.
        assert_eq!(info.timebase_hz, 400_000_000);
        assert_eq!(info.cpu_hz, 400_000_000);
        assert_eq!(
            info.uart0,
            Some(UartInfo {
                phys: 0xef60_0300,
                clock_hz: 11_059_200,
                irq: Some(0)
            })
        );
        assert_eq!(
            info.uic,
            Some(UicInfo {
                dcr_base: 0xc0,
                num_irqs: 32
            })
        );
        // The fixture script passes a 15-byte initrd; bamboo loads it at 0x0190_0000.
        assert_eq!(info.initrd, Some((0x0190_0000, 0x0190_000f)));
        assert_eq!(info.bootargs.as_str(), "console=ttyS0");
        assert_eq!(fdt_total_size(BAMBOO), Some(BAMBOO.len()));
    }

    /// A minimal tree writer for hand-made test trees.
    #[derive(Default)]
    struct Dtb {
        structs: Vec<u8>,
        strings: Vec<u8>,
    }

    impl Dtb {
        fn word(&mut self, w: u32) -> &mut Self {
            self.structs.extend_from_slice(&w.to_be_bytes());
            self
        }
        fn pad(&mut self) {
            while !self.structs.len().is_multiple_of(4) {
                self.structs.push(0);
            }
        }
        fn begin(&mut self, name: &str) -> &mut Self {
            self.word(TOKEN_BEGIN_NODE);
            self.structs.extend_from_slice(name.as_bytes());
            self.structs.push(0);
            self.pad();
            self
        }
        fn end(&mut self) -> &mut Self {
            self.word(TOKEN_END_NODE)
        }
        fn prop(&mut self, name: &str, value: &[u8]) -> &mut Self {
            let off = self.strings.len() as u32;
            self.strings.extend_from_slice(name.as_bytes());
            self.strings.push(0);
            self.word(TOKEN_PROP).word(value.len() as u32).word(off);
            self.structs.extend_from_slice(value);
            self.pad();
            self
        }
        fn cells(&mut self, name: &str, cells: &[u32]) -> &mut Self {
            let v: Vec<u8> = cells.iter().flat_map(|c| c.to_be_bytes()).collect();
            self.prop(name, &v)
        }
        fn finish(&mut self) -> Vec<u8> {
            self.word(TOKEN_END);
            let off_rsv = HEADER_LEN as u32;
            let off_struct = off_rsv + 16;
            let off_strings = off_struct + self.structs.len() as u32;
            let total = off_strings + self.strings.len() as u32;
            let mut out = Vec::new();
            for w in [
                FDT_MAGIC,
                total,
                off_struct,
                off_strings,
                off_rsv,
                17,
                16,
                0,
            ]
            .into_iter()
            .chain([self.strings.len() as u32, self.structs.len() as u32])
            {
                out.extend_from_slice(&w.to_be_bytes());
            }
            out.extend_from_slice(&[0; 16]);
            out.extend_from_slice(&self.structs);
            out.extend_from_slice(&self.strings);
            out
        }
    }

    /// A 44x-like tree: 36-bit PLB with the OPB mapped at 0x1_e000_0000.
    fn tree_44x(uart_status: &str, chosen: impl Fn(&mut Dtb)) -> Vec<u8> {
        let mut d = Dtb::default();
        d.begin("")
            .cells("#address-cells", &[2])
            .cells("#size-cells", &[1]);
        d.begin("cpus")
            .cells("#address-cells", &[1])
            .cells("#size-cells", &[0]);
        d.cells("timebase-frequency", &[0, 33_333_333]);
        d.begin("cpu@0")
            .prop("device_type", b"cpu\0")
            .cells("reg", &[0]);
        d.cells("clock-frequency", &[666_666_666]).end();
        d.end();
        d.begin("memory@0")
            .prop("device_type", b"memory\0")
            .cells("reg", &[0, 0x1000_0000, 0x2000_0000])
            .end();
        d.begin("interrupt-controller1")
            .prop("compatible", b"ibm,uic\0")
            .cells("dcr-reg", &[0xd0, 9]);
        d.cells("interrupts", &[30, 4]).end();
        d.begin("interrupt-controller0")
            .prop("compatible", b"ibm,uic-440gx\0ibm,uic\0")
            .cells("dcr-reg", &[0xc0, 9])
            .end();
        d.begin("plb")
            .cells("#address-cells", &[2])
            .cells("#size-cells", &[1])
            .prop("ranges", &[]);
        d.begin("opb")
            .cells("#address-cells", &[1])
            .cells("#size-cells", &[1]);
        d.cells(
            "ranges",
            &[
                0x0000_0000,
                1,
                0x0000_0000,
                0x8000_0000,
                0xe000_0000,
                1,
                0xe000_0000,
                0x2000_0000,
            ],
        );
        d.begin("serial@ef600200")
            .prop("compatible", b"ns16550\0")
            .prop("status", b"disabled\0");
        d.cells("reg", &[0xef60_0200, 8]).end();
        d.begin("serial@ef600300")
            .prop("compatible", b"ns16550a\0")
            .prop("status", uart_status.as_bytes());
        d.cells("reg", &[0xef60_0300, 8])
            .cells("clock-frequency", &[0, 1_843_200])
            .cells("interrupts", &[5, 4])
            .end();
        d.end().end();
        d.begin("chosen");
        chosen(&mut d);
        d.end();
        d.end();
        d.finish()
    }

    #[test]
    fn translates_36_bit_ranges_and_skips_disabled_nodes() {
        let blob = tree_44x("okay\0", |d| {
            d.cells("linux,initrd-start", &[0, 0x0200_0000])
                .cells("linux,initrd-end", &[0x0200_1000]);
            d.prop("bootargs", "é".repeat(200).as_bytes());
        });
        let info = BoardInfo::from_fdt(&blob).unwrap();
        assert_eq!((info.mem_base, info.mem_size), (0x1000_0000, 0x2000_0000));
        assert_eq!((info.timebase_hz, info.cpu_hz), (33_333_333, 666_666_666));
        assert_eq!(
            info.uart0,
            Some(UartInfo {
                phys: 0x1_ef60_0300,
                clock_hz: 1_843_200,
                irq: Some(5)
            })
        );
        // The cascaded UIC1 comes first in the tree but the primary one is chosen.
        assert_eq!(
            info.uic,
            Some(UicInfo {
                dcr_base: 0xc0,
                num_irqs: 32
            })
        );
        assert_eq!(info.initrd, Some((0x0200_0000, 0x0200_1000)));
        assert_eq!(info.bootargs.len(), BOOTARGS_LEN);
        assert_eq!(info.bootargs_len, 400);
        assert!(info.bootargs.chars().all(|c| c == 'é'));
    }

    #[test]
    fn reports_broken_facts() {
        let blob = tree_44x("disabled\0", |d| {
            d.cells("linux,initrd-start", &[0x100]);
        });
        assert_eq!(BoardInfo::from_fdt(&blob), Err(BootInfoError::BadInitrd));
        let blob = tree_44x("disabled\0", |d| {
            d.cells("linux,initrd-start", &[0x100])
                .cells("linux,initrd-end", &[0x100]);
            d.prop("bootargs", b"\xff\0");
        });
        assert_eq!(BoardInfo::from_fdt(&blob), Err(BootInfoError::BadBootargs));
        let blob = tree_44x("disabled\0", |d| {
            d.cells("linux,initrd-start", &[0x100])
                .cells("linux,initrd-end", &[0x100]);
        });
        let info = BoardInfo::from_fdt(&blob).unwrap();
        assert_eq!(info.uart0, None);
        assert_eq!(info.initrd, None);
        assert_eq!(info.bootargs.as_str(), "");
    }

    #[test]
    fn uart_outside_every_range_is_untranslatable() {
        let mut d = Dtb::default();
        d.begin("")
            .cells("#address-cells", &[1])
            .cells("#size-cells", &[1]);
        d.begin("cpus")
            .begin("cpu@0")
            .cells("timebase-frequency", &[1000])
            .end()
            .end();
        d.begin("memory").cells("reg", &[0, 0x100_0000]).end();
        d.begin("bus")
            .cells("#address-cells", &[1])
            .cells("#size-cells", &[1]);
        d.cells("ranges", &[0, 0x4000_0000, 0x1000]);
        d.begin("serial@2000")
            .prop("compatible", b"ns16550\0")
            .cells("reg", &[0x2000, 8])
            .end();
        d.end().end();
        assert_eq!(
            BoardInfo::from_fdt(&d.finish()),
            Err(BootInfoError::UartNotTranslatable)
        );
    }

    #[test]
    fn rejects_structural_damage() {
        let ok = |f: &dyn Fn(&mut Dtb)| {
            let mut d = Dtb::default();
            d.begin("")
                .cells("#address-cells", &[1])
                .cells("#size-cells", &[1]);
            f(&mut d);
            d.begin("cpus")
                .begin("cpu@0")
                .cells("timebase-frequency", &[1000])
                .end()
                .end();
            d.begin("memory").cells("reg", &[0, 0x100_0000]).end();
            d.end();
            BoardInfo::from_fdt(&d.finish())
        };
        assert!(ok(&|_| {}).is_ok());
        assert_eq!(
            ok(&|d| {
                d.word(TOKEN_NOP);
            }),
            Err(BootInfoError::Nop)
        );
        assert_eq!(
            ok(&|d| {
                d.prop("a/b", b"");
            }),
            Err(BootInfoError::BadStructure)
        );
        assert_eq!(
            ok(&|d| {
                d.prop("#size-cells", b"\0\0");
            }),
            Err(BootInfoError::BadStructure)
        );
        assert_eq!(
            ok(&|d| {
                d.begin("x").end().prop("late", b"");
            }),
            Err(BootInfoError::BadStructure)
        );
        assert_eq!(
            ok(&|d| {
                d.word(7);
            }),
            Err(BootInfoError::BadStructure)
        );
        assert_eq!(
            ok(&|d| {
                for _ in 0..MAX_DEPTH {
                    d.begin("n");
                }
                for _ in 0..MAX_DEPTH {
                    d.end();
                }
            }),
            Err(BootInfoError::TooDeep)
        );
        let mut d = Dtb::default();
        d.begin("").begin("cpus").end().end();
        assert_eq!(
            BoardInfo::from_fdt(&d.finish()),
            Err(BootInfoError::NoMemory)
        );
        assert_eq!(BoardInfo::from_fdt(&[]), Err(BootInfoError::BadBlob));
        assert_eq!(
            BoardInfo::from_fdt(&BAMBOO[..BAMBOO.len() - 1]),
            Err(BootInfoError::BadBlob)
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = BoardInfo::from_fdt(&bytes);
            let _ = fdt_total_size(&bytes);
        }

        #[test]
        fn random_bytes_behind_a_valid_magic_never_panic(bytes in proptest::collection::vec(any::<u8>(), 40..512)) {
            let mut b = bytes;
            b[..4].copy_from_slice(&FDT_MAGIC.to_be_bytes());
            let _ = BoardInfo::from_fdt(&b);
        }

        #[test]
        fn truncated_fixture_never_panics(len in 0..BAMBOO.len()) {
            let _ = BoardInfo::from_fdt(&BAMBOO[..len]);
        }

        #[test]
        fn corrupted_fixture_never_panics(
            edits in proptest::collection::vec((0..3300usize, any::<u8>()), 1..8),
            total_len in prop_oneof![Just(None), (0..BAMBOO.len()).prop_map(Some)],
        ) {
            // Only the header and the structure and strings blocks (the first 3278 bytes) matter.
            let mut b = BAMBOO.to_vec();
            for (pos, val) in edits {
                b[pos] = val;
            }
            if let Some(n) = total_len {
                b[4..8].copy_from_slice(&(n as u32).to_be_bytes());
            }
            if let Ok(info) = BoardInfo::from_fdt(&b) {
                prop_assert!(info.mem_size > 0);
            }
        }
    }
}
