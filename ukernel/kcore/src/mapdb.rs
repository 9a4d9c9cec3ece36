//! The L4 mapping database: one derivation tree per physical frame (L4 X.2 §4 "Mapping";
//! Pistachio `kernel/src/generic/mapping.cc`).
//!
//! Every page mapping of a user address space is a [`Node`]. A *root* node is a mapping
//! the kernel created from nothing (sigma0's idempotent view of physical memory, device
//! pages); every other node was derived from its parent by a map (a copy with at most the
//! parent's rights) and may since have been moved by a grant. Unmapping a page revokes the
//! rights from every mapping derived from it, recursively; the kernel learns about each
//! changed mapping through a callback and fixes its page tables and the TLB there.
//!
//! The database does not index mappings by `(space, vpage)`: the kernel keeps the
//! [`NodeId`] of each mapping in its own page-table entry, and it must revoke or delete
//! an old mapping before it maps something new over the same page.
//!
//! Invariants (checked by the property test against a reference model):
//! - a live node's rights are never empty and are a subset of its parent's rights;
//! - a node's children form a doubly linked sibling list starting at `first_child`, and
//!   each child's `parent` names the node;
//! - `depth` is 0 for roots and the parent's depth + 1 otherwise, at most `u16::MAX`
//!   (a map that would go deeper fails with [`MapDbError::TooDeep`]);
//! - every slot is either live or free, and `free_count() + live nodes == N`;
//! - no operation recurses: trees may be as deep as the arena is large.
//!
//! Links are stored as `index + 1` with 0 meaning "none", so a fresh database is all zero
//! bytes and a `static` of it lands in `.bss` instead of the kernel image.

use core::fmt;

use kestrel_abi::Rights;

/// Index of a node in the database's arena.
pub type NodeId = u32;

/// "No node", as returned by the [`Node`] link accessors.
pub const NIL_NODE: NodeId = u32::MAX;

/// Largest arena a [`MapDb`] may have (keeps ids well below [`NIL_NODE`]).
pub const MAX_NODES: usize = 1 << 20;

/// A stored link: 0 = none, `i + 1` = node `i`. The wrapping conversions map
/// [`NIL_NODE`] to 0 and back.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Link(u32);

impl Link {
    const NONE: Link = Link(0);

    const fn to(index: usize) -> Link {
        Link(index as u32 + 1)
    }
    const fn id(self) -> NodeId {
        self.0.wrapping_sub(1)
    }
    const fn index(self) -> Option<usize> {
        if self.0 == 0 {
            None
        } else {
            Some(self.0 as usize - 1)
        }
    }
}

/// One mapping: a virtual page of an address space backed by a physical frame.
#[derive(Clone, Copy, Debug)]
pub struct Node {
    vpage: u32,
    frame: u32,
    parent: Link,
    first_child: Link,
    /// Also the free-list link while the slot is free.
    next_sibling: Link,
    prev_sibling: Link,
    space: u16,
    depth: u16,
    rights: Rights,
    live: bool,
}

impl Node {
    const EMPTY: Node = Node {
        vpage: 0,
        frame: 0,
        parent: Link::NONE,
        first_child: Link::NONE,
        next_sibling: Link::NONE,
        prev_sibling: Link::NONE,
        space: 0,
        depth: 0,
        rights: Rights::NONE,
        live: false,
    };

    /// The address space holding this mapping.
    pub const fn space(&self) -> u16 {
        self.space
    }
    /// Virtual page number (`vaddr >> 12`) in [`Node::space`].
    pub const fn vpage(&self) -> u32 {
        self.vpage
    }
    /// Physical page number (`paddr >> 12`); the same for the whole tree.
    pub const fn frame(&self) -> u32 {
        self.frame
    }
    /// Access rights; never empty for a live node.
    pub const fn rights(&self) -> Rights {
        self.rights
    }
    /// The mapping this one was derived from, or [`NIL_NODE`] for a root.
    pub const fn parent(&self) -> NodeId {
        self.parent.id()
    }
    pub const fn first_child(&self) -> NodeId {
        self.first_child.id()
    }
    pub const fn next_sibling(&self) -> NodeId {
        self.next_sibling.id()
    }
    pub const fn prev_sibling(&self) -> NodeId {
        self.prev_sibling.id()
    }
    /// 0 for a root, parent's depth + 1 otherwise.
    pub const fn depth(&self) -> u16 {
        self.depth
    }
    pub const fn is_root(&self) -> bool {
        self.parent.0 == 0
    }
}

/// A mapping whose rights a [`MapDb::revoke`] reduced.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Revoked {
    pub space: u16,
    pub vpage: u32,
    pub frame: u32,
    pub node: NodeId,
    /// The rights left. Empty means the node was deleted (its id is free again once the
    /// callback returns): remove the page-table entry and flush the TLB entry.
    pub new_rights: Rights,
}

/// Why a mapping-database operation was refused. Nothing was changed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MapDbError {
    /// Every mapping node is in use: unmap something or build the kernel with a larger database.
    Full,
    /// The node id does not name a live mapping.
    InvalidNode,
    /// The requested rights have nothing in common with the source mapping's rights.
    NoRights,
    /// The grant would remove rights that mappings derived from the node still hold;
    /// revoke them first (see [`MapDb::grant_revoking`]).
    RightsInUse,
    /// The mapping would be derived more than `u16::MAX` levels deep.
    TooDeep,
}

impl MapDbError {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Full => "mapping database full: unmap pages or enlarge the database",
            Self::InvalidNode => "no such mapping node",
            Self::TooDeep => "mapping derived too deeply (more than 65535 levels)",
            Self::NoRights => "requested rights do not overlap the source mapping's rights",
            Self::RightsInUse => {
                "grant would remove rights still held by derived mappings: revoke them first"
            }
        }
    }
}

impl fmt::Display for MapDbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mapping database with room for `N` mappings (32 bytes each).
pub struct MapDb<const N: usize> {
    nodes: [Node; N],
    /// Head of the list of freed slots (linked through `next_sibling`).
    free_head: Link,
    /// Slots at and above this index have never been used and are not on the free list.
    fresh: u32,
    free: u32,
}

impl<const N: usize> Default for MapDb<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> MapDb<N> {
    /// An empty database. `const` so that it can initialise a `static`.
    pub const fn new() -> Self {
        const { assert!(N <= MAX_NODES, "MapDb holds at most MAX_NODES nodes") };
        MapDb {
            nodes: [Node::EMPTY; N],
            free_head: Link::NONE,
            fresh: 0,
            free: N as u32,
        }
    }

    /// Total number of node slots.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Number of unused node slots.
    pub const fn free_count(&self) -> usize {
        self.free as usize
    }

    pub fn is_live(&self, node: NodeId) -> bool {
        self.get(node).is_some()
    }

    /// The node, if `node` names a live mapping.
    pub fn get(&self, node: NodeId) -> Option<&Node> {
        let n = self.nodes.get(usize::try_from(node).ok()?)?;
        if n.live {
            Some(n)
        } else {
            None
        }
    }

    /// The mappings derived directly from `node` (none if `node` is not live).
    pub fn children(&self, node: NodeId) -> ChildIter<'_, N> {
        let next = match self.get(node) {
            Some(n) => n.first_child,
            None => Link::NONE,
        };
        ChildIter { db: self, next }
    }

    /// Records a mapping derived from nothing: the start of a new tree for `frame`.
    pub fn insert_root(
        &mut self,
        space: u16,
        vpage: u32,
        frame: u32,
        rights: Rights,
    ) -> Result<NodeId, MapDbError> {
        let rights = rights.intersect(Rights::RWX);
        if rights.is_empty() {
            return Err(MapDbError::NoRights);
        }
        let i = self.alloc()?;
        self.nodes[i] = Node {
            space,
            vpage,
            frame,
            rights,
            live: true,
            ..Node::EMPTY
        };
        Ok(i as NodeId)
    }

    /// Derives a mapping of `parent`'s frame at `(space, vpage)` with the rights both
    /// `rights` and the parent have (L4 map).
    pub fn map(
        &mut self,
        parent: NodeId,
        space: u16,
        vpage: u32,
        rights: Rights,
    ) -> Result<NodeId, MapDbError> {
        let p = *self.get(parent).ok_or(MapDbError::InvalidNode)?;
        let rights = rights.intersect(p.rights);
        if rights.is_empty() {
            return Err(MapDbError::NoRights);
        }
        let depth = p.depth.checked_add(1).ok_or(MapDbError::TooDeep)?;
        let i = self.alloc()?;
        let pi = parent as usize;
        self.nodes[i] = Node {
            space,
            vpage,
            frame: p.frame,
            rights,
            parent: Link::to(pi),
            next_sibling: p.first_child,
            depth,
            live: true,
            ..Node::EMPTY
        };
        if let Some(old_first) = p.first_child.index() {
            self.nodes[old_first].prev_sibling = Link::to(i);
        }
        self.nodes[pi].first_child = Link::to(i);
        Ok(i as NodeId)
    }

    /// Moves the mapping `node` to `(space, vpage)` (L4 grant): it keeps its place in the
    /// tree and its children, and its rights become `rights` ∩ its current rights.
    /// Returns the node's id, which is unchanged.
    ///
    /// Fails with [`MapDbError::RightsInUse`] if the reduction would take rights away from
    /// a derived mapping; [`MapDb::grant_revoking`] revokes those first.
    pub fn grant(
        &mut self,
        node: NodeId,
        space: u16,
        vpage: u32,
        rights: Rights,
    ) -> Result<NodeId, MapDbError> {
        let n = *self.get(node).ok_or(MapDbError::InvalidNode)?;
        let rights = rights.intersect(n.rights);
        if rights.is_empty() {
            return Err(MapDbError::NoRights);
        }
        let removed = n.rights.remove(rights);
        // Children hold subsets of this node's rights and grandchildren subsets of theirs,
        // so checking the children is enough.
        if !removed.is_empty() && self.children(node).any(|c| self.holds_any(c, removed)) {
            return Err(MapDbError::RightsInUse);
        }
        let slot = &mut self.nodes[node as usize];
        slot.space = space;
        slot.vpage = vpage;
        slot.rights = rights;
        Ok(node)
    }

    /// [`MapDb::grant`] that first revokes, from the mappings derived from `node`, the
    /// rights the grant takes away, reporting each changed mapping to `f`.
    pub fn grant_revoking(
        &mut self,
        node: NodeId,
        space: u16,
        vpage: u32,
        rights: Rights,
        f: &mut dyn FnMut(Revoked),
    ) -> Result<NodeId, MapDbError> {
        let n = *self.get(node).ok_or(MapDbError::InvalidNode)?;
        let kept = rights.intersect(n.rights);
        if kept.is_empty() {
            return Err(MapDbError::NoRights);
        }
        self.revoke(node, n.rights.remove(kept), false, f)?;
        self.grant(node, space, vpage, rights)
    }

    /// Removes `rights` from every mapping derived from `node`, and from `node` itself if
    /// `include_self` (L4 unmap, and flush with `include_self`).
    ///
    /// `f` is called exactly once for each mapping whose rights changed, with the rights
    /// left. A mapping left with no rights is deleted together with everything derived
    /// from it, and each deleted mapping is reported with empty rights. Mappings that
    /// held none of `rights` are untouched and not reported (nor are their descendants,
    /// which cannot hold them either).
    pub fn revoke(
        &mut self,
        node: NodeId,
        rights: Rights,
        include_self: bool,
        f: &mut dyn FnMut(Revoked),
    ) -> Result<(), MapDbError> {
        let n = *self.get(node).ok_or(MapDbError::InvalidNode)?;
        let rights = rights.intersect(Rights::RWX);
        if !self.holds_any(node, rights) {
            return Ok(());
        }
        let top = node as usize;
        if include_self {
            let left = n.rights.remove(rights);
            if left.is_empty() {
                self.delete_subtree(top, f);
                return Ok(());
            }
            self.nodes[top].rights = left;
            f(self.report(top));
        }
        // Pre-order walk of the strict descendants of `top`.
        let mut cur = n.first_child.index();
        while let Some(i) = cur {
            let held = self.nodes[i].rights;
            if held.intersect(rights).is_empty() {
                cur = self.next_after_subtree(i, top);
                continue;
            }
            let left = held.remove(rights);
            if left.is_empty() {
                // The next node lies outside `i`'s subtree, so it survives the deletion.
                cur = self.next_after_subtree(i, top);
                self.delete_subtree(i, f);
            } else {
                self.nodes[i].rights = left;
                f(self.report(i));
                cur = match self.nodes[i].first_child.index() {
                    Some(c) => Some(c),
                    None => self.next_after_subtree(i, top),
                };
            }
        }
        Ok(())
    }

    fn holds_any(&self, node: NodeId, rights: Rights) -> bool {
        self.get(node)
            .is_some_and(|n| !n.rights.intersect(rights).is_empty())
    }

    fn report(&self, i: usize) -> Revoked {
        let n = &self.nodes[i];
        Revoked {
            space: n.space,
            vpage: n.vpage,
            frame: n.frame,
            node: i as NodeId,
            new_rights: n.rights,
        }
    }

    /// The pre-order successor of `i`'s subtree inside `top`'s subtree (`i` must be a
    /// strict descendant of `top`, or `top` itself).
    fn next_after_subtree(&self, mut i: usize, top: usize) -> Option<usize> {
        loop {
            if i == top {
                return None;
            }
            let n = &self.nodes[i];
            if let Some(s) = n.next_sibling.index() {
                return Some(s);
            }
            i = n.parent.index()?;
        }
    }

    /// Deletes `top` and all its descendants, leaves first, reporting each with empty
    /// rights. Each edge is walked down once and up once.
    fn delete_subtree(&mut self, top: usize, f: &mut dyn FnMut(Revoked)) {
        let mut cur = top;
        loop {
            while let Some(c) = self.nodes[cur].first_child.index() {
                cur = c;
            }
            let parent = self.nodes[cur].parent.index();
            self.nodes[cur].rights = Rights::NONE;
            f(self.report(cur));
            self.unlink(cur);
            self.release(cur);
            if cur == top {
                return;
            }
            match parent {
                Some(p) => cur = p,
                // Unreachable: every strict descendant of `top` has a parent.
                None => return,
            }
        }
    }

    /// Takes node `i` out of its parent's child list.
    fn unlink(&mut self, i: usize) {
        let n = self.nodes[i];
        match n.prev_sibling.index() {
            Some(p) => self.nodes[p].next_sibling = n.next_sibling,
            None => {
                if let Some(p) = n.parent.index() {
                    self.nodes[p].first_child = n.next_sibling;
                }
            }
        }
        if let Some(s) = n.next_sibling.index() {
            self.nodes[s].prev_sibling = n.prev_sibling;
        }
    }

    fn alloc(&mut self) -> Result<usize, MapDbError> {
        let i = if let Some(i) = self.free_head.index() {
            self.free_head = self.nodes[i].next_sibling;
            i
        } else if (self.fresh as usize) < N {
            self.fresh += 1;
            self.fresh as usize - 1
        } else {
            return Err(MapDbError::Full);
        };
        self.free -= 1;
        Ok(i)
    }

    fn release(&mut self, i: usize) {
        self.nodes[i] = Node {
            next_sibling: self.free_head,
            ..Node::EMPTY
        };
        self.free_head = Link::to(i);
        self.free += 1;
    }
}

/// Iterator over a node's children, newest first.
pub struct ChildIter<'a, const N: usize> {
    db: &'a MapDb<N>,
    next: Link,
}

impl<const N: usize> Iterator for ChildIter<'_, N> {
    type Item = NodeId;

    fn next(&mut self) -> Option<NodeId> {
        let i = self.next.index()?;
        self.next = self.db.nodes[i].next_sibling;
        Some(i as NodeId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};
    use std::vec::Vec;

    fn collect<const N: usize>(
        db: &mut MapDb<N>,
        node: NodeId,
        rights: Rights,
        include_self: bool,
    ) -> Vec<Revoked> {
        let mut out = Vec::new();
        db.revoke(node, rights, include_self, &mut |r| out.push(r))
            .unwrap();
        out
    }

    #[test]
    fn map_intersects_rights_and_links_children() {
        let mut db = MapDb::<16>::new();
        let root = db.insert_root(0, 0x80000, 0x100, Rights::RWX).unwrap();
        let a = db.map(root, 1, 0x10000, Rights::RW).unwrap();
        let b = db.map(a, 2, 0x20000, Rights::RX).unwrap();
        assert_eq!(db.get(a).unwrap().rights(), Rights::RW);
        assert_eq!(db.get(b).unwrap().rights(), Rights::R);
        assert_eq!(db.get(b).unwrap().frame(), 0x100);
        assert_eq!(db.get(b).unwrap().depth(), 2);
        assert_eq!(db.get(b).unwrap().parent(), a);
        assert!(db.get(root).unwrap().is_root());
        assert_eq!(db.children(root).collect::<Vec<_>>(), [a]);
        assert_eq!(db.map(b, 3, 0, Rights::W), Err(MapDbError::NoRights));
        assert_eq!(
            db.map(NIL_NODE, 3, 0, Rights::R),
            Err(MapDbError::InvalidNode)
        );
        assert_eq!(db.map(15, 3, 0, Rights::R), Err(MapDbError::InvalidNode));
        assert_eq!(
            db.insert_root(0, 0, 0, Rights(0xf8)),
            Err(MapDbError::NoRights)
        );
        assert_eq!(db.free_count(), 13);
    }

    #[test]
    fn recursive_revoke_deletes_whole_subtree() {
        let mut db = MapDb::<16>::new();
        let root = db.insert_root(0, 1, 7, Rights::RWX).unwrap();
        let a = db.map(root, 1, 10, Rights::RWX).unwrap();
        let b = db.map(a, 2, 20, Rights::RW).unwrap();
        let c = db.map(b, 3, 30, Rights::R).unwrap();
        let d = db.map(c, 4, 40, Rights::R).unwrap();
        let e = db.map(a, 5, 50, Rights::RX).unwrap();
        let out = collect(&mut db, root, Rights::RWX, false);
        let got: BTreeSet<NodeId> = out.iter().map(|r| r.node).collect();
        assert_eq!(got, BTreeSet::from([a, b, c, d, e]));
        assert_eq!(out.len(), 5);
        assert!(out.iter().all(|r| r.new_rights.is_empty() && r.frame == 7));
        assert!(out
            .iter()
            .any(|r| r.node == d && r.space == 4 && r.vpage == 40));
        assert!(db.is_live(root));
        assert_eq!(db.children(root).count(), 0);
        assert_eq!(db.free_count(), 15);
    }

    #[test]
    fn partial_revoke_keeps_remaining_rights() {
        let mut db = MapDb::<16>::new();
        let root = db.insert_root(0, 1, 7, Rights::RWX).unwrap();
        let a = db.map(root, 1, 10, Rights::RW).unwrap();
        let b = db.map(a, 2, 20, Rights::RW).unwrap();
        let c = db.map(b, 3, 30, Rights::R).unwrap();
        let x = db.map(root, 4, 40, Rights::RX).unwrap();
        let out = collect(&mut db, root, Rights::W, false);
        // c and x held no W: untouched and unreported.
        assert_eq!(
            out.iter()
                .map(|r| (r.node, r.new_rights.0))
                .collect::<BTreeSet<_>>(),
            BTreeSet::from([(a, Rights::R.0), (b, Rights::R.0)])
        );
        assert_eq!(db.get(c).unwrap().rights(), Rights::R);
        assert_eq!(db.get(x).unwrap().rights(), Rights::RX);
        assert_eq!(db.get(root).unwrap().rights(), Rights::RWX);
        // Only R is left below a: removing R deletes a, b and c.
        let out = collect(&mut db, a, Rights::R, true);
        assert_eq!(out.len(), 3);
        assert!(!db.is_live(a) && !db.is_live(b) && !db.is_live(c));
        assert!(db.is_live(x));
    }

    #[test]
    fn include_self_reduces_or_deletes_the_node() {
        let mut db = MapDb::<8>::new();
        let root = db.insert_root(0, 1, 7, Rights::RWX).unwrap();
        let a = db.map(root, 1, 10, Rights::RWX).unwrap();
        let b = db.map(a, 2, 20, Rights::RX).unwrap();
        let out = collect(&mut db, a, Rights::X, true);
        assert_eq!(out.len(), 2);
        assert_eq!(db.get(a).unwrap().rights(), Rights::RW);
        assert_eq!(db.get(b).unwrap().rights(), Rights::R);
        let out = collect(&mut db, a, Rights::RWX, true);
        assert_eq!(out.len(), 2);
        assert!(!db.is_live(a) && !db.is_live(b));
        assert_eq!(db.children(root).count(), 0);
        // Revoking from a root with include_self deletes the root.
        let out = collect(&mut db, root, Rights::RWX, true);
        assert_eq!(
            out,
            [Revoked {
                space: 0,
                vpage: 1,
                frame: 7,
                node: root,
                new_rights: Rights::NONE
            }]
        );
        assert_eq!(db.free_count(), 8);
        assert_eq!(
            db.revoke(root, Rights::R, true, &mut |_| {}),
            Err(MapDbError::InvalidNode)
        );
    }

    #[test]
    fn grant_moves_node_and_keeps_children() {
        let mut db = MapDb::<8>::new();
        let root = db.insert_root(0, 1, 7, Rights::RWX).unwrap();
        let a = db.map(root, 1, 10, Rights::RWX).unwrap();
        let b = db.map(a, 2, 20, Rights::RW).unwrap();
        assert_eq!(db.grant(a, 9, 90, Rights::RWX), Ok(a));
        let n = db.get(a).unwrap();
        assert_eq!(
            (n.space(), n.vpage(), n.rights(), n.parent()),
            (9, 90, Rights::RWX, root)
        );
        assert_eq!(db.children(a).collect::<Vec<_>>(), [b]);
        // Dropping X is fine (b has none), dropping W is not (b holds it).
        assert_eq!(db.grant(a, 9, 91, Rights::RW), Ok(a));
        assert_eq!(db.grant(a, 9, 92, Rights::R), Err(MapDbError::RightsInUse));
        assert_eq!(db.get(a).unwrap().vpage(), 91);
        assert_eq!(db.grant(a, 9, 92, Rights::X), Err(MapDbError::NoRights));
        let mut out = Vec::new();
        assert_eq!(
            db.grant_revoking(a, 8, 80, Rights::R, &mut |r| out.push(r)),
            Ok(a)
        );
        assert_eq!(
            out.iter()
                .map(|r| (r.node, r.new_rights))
                .collect::<Vec<_>>(),
            [(b, Rights::R)]
        );
        assert_eq!(db.get(a).unwrap().rights(), Rights::R);
        assert_eq!(db.get(a).unwrap().space(), 8);
    }

    #[test]
    fn exhaustion_and_reuse() {
        let mut db = MapDb::<4>::new();
        let root = db.insert_root(0, 0, 0, Rights::RW).unwrap();
        let a = db.map(root, 1, 1, Rights::RW).unwrap();
        let b = db.map(root, 2, 2, Rights::RW).unwrap();
        let c = db.map(a, 3, 3, Rights::R).unwrap();
        assert_eq!(db.free_count(), 0);
        assert_eq!(db.map(root, 4, 4, Rights::R), Err(MapDbError::Full));
        assert_eq!(db.insert_root(0, 5, 5, Rights::R), Err(MapDbError::Full));
        collect(&mut db, a, Rights::RWX, true);
        assert_eq!(db.free_count(), 2);
        assert!(!db.is_live(c));
        let d = db.map(b, 6, 6, Rights::R).unwrap();
        let e = db.map(d, 7, 7, Rights::R).unwrap();
        assert!(d == a || d == c);
        assert!(e == a || e == c);
        assert_eq!(db.map(root, 4, 4, Rights::R), Err(MapDbError::Full));
    }

    #[test]
    fn deep_chain_revokes_without_recursion() {
        const N: usize = 20_000;
        let mut db = std::boxed::Box::new(MapDb::<N>::new());
        let mut cur = db.insert_root(0, 0, 42, Rights::RWX).unwrap();
        let root = cur;
        for i in 1..N as u32 {
            cur = db.map(cur, (i % 7) as u16, i, Rights::RWX).unwrap();
        }
        assert_eq!(db.get(cur).unwrap().depth() as usize, N - 1);
        let mut count = 0;
        db.revoke(root, Rights::W, false, &mut |r| {
            assert_eq!(r.new_rights, Rights::RX);
            count += 1
        })
        .unwrap();
        assert_eq!(count, N - 1);
        count = 0;
        db.revoke(root, Rights::RWX, true, &mut |_| count += 1)
            .unwrap();
        assert_eq!(count, N);
        assert_eq!(db.free_count(), N);
    }

    #[test]
    fn static_database_is_const() {
        static DB: MapDb<64> = MapDb::new();
        assert_eq!(DB.free_count(), 64);
        assert_eq!(core::mem::size_of::<Node>(), 32);
    }

    // ---- reference model --------------------------------------------------------------

    #[derive(Clone, Debug)]
    struct MNode {
        space: u16,
        vpage: u32,
        frame: u32,
        rights: Rights,
        parent: Option<NodeId>,
    }

    #[derive(Default)]
    struct Model {
        nodes: BTreeMap<NodeId, MNode>,
    }

    impl Model {
        fn children(&self, id: NodeId) -> BTreeSet<NodeId> {
            self.nodes
                .iter()
                .filter(|(_, n)| n.parent == Some(id))
                .map(|(k, _)| *k)
                .collect()
        }
        fn subtree(&self, id: NodeId) -> Vec<NodeId> {
            let mut out = std::vec![id];
            let mut i = 0;
            while i < out.len() {
                out.extend(self.children(out[i]));
                i += 1;
            }
            out
        }
        /// Expected reports, as a set, and applies the change.
        fn revoke(
            &mut self,
            id: NodeId,
            rights: Rights,
            include_self: bool,
        ) -> BTreeSet<(NodeId, u16, u32, u32, u8)> {
            let mut out = BTreeSet::new();
            let mut dead = BTreeSet::new();
            for n in self.subtree(id) {
                if dead.contains(&n) || (n == id && !include_self) {
                    continue;
                }
                let m = self.nodes[&n].clone();
                if m.rights.intersect(rights).is_empty() {
                    continue;
                }
                let left = m.rights.remove(rights);
                if left.is_empty() {
                    for d in self.subtree(n) {
                        let dm = &self.nodes[&d];
                        out.insert((d, dm.space, dm.vpage, dm.frame, 0));
                        dead.insert(d);
                    }
                } else {
                    self.nodes.get_mut(&n).unwrap().rights = left;
                    out.insert((n, m.space, m.vpage, m.frame, left.0));
                }
            }
            for d in dead {
                self.nodes.remove(&d);
            }
            out
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Root(u16, u32, u32, u8),
        Map(usize, u16, u32, u8),
        Grant(usize, u16, u32, u8),
        GrantRevoking(usize, u16, u32, u8),
        Revoke(usize, u8, bool),
        Stale(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            1 => (0u16..4, 0u32..64, 0u32..8, 0u8..8).prop_map(|(s, v, f, r)| Op::Root(s, v, f, r)),
            6 => (any::<usize>(), 0u16..4, 0u32..64, 0u8..8).prop_map(|(i, s, v, r)| Op::Map(i, s, v, r)),
            1 => (any::<usize>(), 0u16..4, 0u32..64, 0u8..8).prop_map(|(i, s, v, r)| Op::Grant(i, s, v, r)),
            1 => (any::<usize>(), 0u16..4, 0u32..64, 0u8..8).prop_map(|(i, s, v, r)| Op::GrantRevoking(i, s, v, r)),
            2 => (any::<usize>(), 0u8..8, any::<bool>()).prop_map(|(i, r, s)| Op::Revoke(i, r, s)),
            1 => (0u32..40).prop_map(Op::Stale),
        ]
    }

    const CAP: usize = 24;

    fn check(db: &MapDb<CAP>, model: &Model) -> Result<(), TestCaseError> {
        prop_assert_eq!(db.free_count(), CAP - model.nodes.len());
        for id in 0..CAP as NodeId + 2 {
            prop_assert_eq!(db.is_live(id), model.nodes.contains_key(&id));
        }
        for (&id, m) in &model.nodes {
            let n = db.get(id).unwrap();
            prop_assert_eq!(
                (n.space(), n.vpage(), n.frame(), n.rights()),
                (m.space, m.vpage, m.frame, m.rights)
            );
            prop_assert!(!n.rights().is_empty());
            prop_assert_eq!(n.parent(), m.parent.unwrap_or(NIL_NODE));
            match m.parent {
                None => prop_assert_eq!(n.depth(), 0),
                Some(p) => {
                    let pn = db.get(p).unwrap();
                    prop_assert!(pn.rights().contains(n.rights()));
                    prop_assert_eq!(n.depth(), pn.depth() + 1);
                    prop_assert_eq!(n.frame(), pn.frame());
                }
            }
            let kids: Vec<NodeId> = db.children(id).collect();
            prop_assert_eq!(
                kids.iter().copied().collect::<BTreeSet<_>>(),
                model.children(id)
            );
            prop_assert_eq!(kids.len(), model.children(id).len());
            for w in kids.windows(2) {
                prop_assert_eq!(db.get(w[1]).unwrap().prev_sibling(), w[0]);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn matches_reference_model(ops in proptest::collection::vec(op(), 1..80)) {
            let mut db = MapDb::<CAP>::new();
            let mut model = Model::default();
            for op in ops {
                let live: Vec<NodeId> = model.nodes.keys().copied().collect();
                let pick = |i: usize| if live.is_empty() { NIL_NODE } else { live[i % live.len()] };
                match op {
                    Op::Root(s, v, f, r) => {
                        let got = db.insert_root(s, v, f, Rights(r));
                        if r & 7 == 0 {
                            prop_assert_eq!(got, Err(MapDbError::NoRights));
                        } else if model.nodes.len() == CAP {
                            prop_assert_eq!(got, Err(MapDbError::Full));
                        } else {
                            let id = got.unwrap();
                            prop_assert!(!model.nodes.contains_key(&id));
                            model.nodes.insert(id, MNode { space: s, vpage: v, frame: f, rights: Rights(r & 7), parent: None });
                        }
                    }
                    Op::Map(i, s, v, r) => {
                        let p = pick(i);
                        let got = db.map(p, s, v, Rights(r));
                        match model.nodes.get(&p).cloned() {
                            None => prop_assert_eq!(got, Err(MapDbError::InvalidNode)),
                            Some(pm) => {
                                let want = pm.rights.intersect(Rights(r));
                                if want.is_empty() {
                                    prop_assert_eq!(got, Err(MapDbError::NoRights));
                                } else if model.nodes.len() == CAP {
                                    prop_assert_eq!(got, Err(MapDbError::Full));
                                } else {
                                    let id = got.unwrap();
                                    prop_assert!(!model.nodes.contains_key(&id));
                                    model.nodes.insert(id, MNode { space: s, vpage: v, frame: pm.frame, rights: want, parent: Some(p) });
                                }
                            }
                        }
                    }
                    Op::Grant(i, s, v, r) | Op::GrantRevoking(i, s, v, r) => {
                        let n = pick(i);
                        let revoking = matches!(op, Op::GrantRevoking(..));
                        let mut reports = BTreeSet::new();
                        let got = if revoking {
                            db.grant_revoking(n, s, v, Rights(r), &mut |x| {
                                reports.insert((x.node, x.space, x.vpage, x.frame, x.new_rights.0));
                            })
                        } else {
                            db.grant(n, s, v, Rights(r))
                        };
                        match model.nodes.get(&n).cloned() {
                            None => prop_assert_eq!(got, Err(MapDbError::InvalidNode)),
                            Some(m) => {
                                let want = m.rights.intersect(Rights(r));
                                let removed = m.rights.remove(want);
                                let in_use = model.children(n).iter().any(|c| !model.nodes[c].rights.intersect(removed).is_empty());
                                if want.is_empty() {
                                    prop_assert_eq!(got, Err(MapDbError::NoRights));
                                } else if in_use && !revoking {
                                    prop_assert_eq!(got, Err(MapDbError::RightsInUse));
                                } else {
                                    prop_assert_eq!(got, Ok(n));
                                    let expect = model.revoke(n, removed, false);
                                    prop_assert_eq!(reports, expect);
                                    let mm = model.nodes.get_mut(&n).unwrap();
                                    mm.space = s;
                                    mm.vpage = v;
                                    mm.rights = want;
                                }
                            }
                        }
                    }
                    Op::Revoke(i, r, include_self) => {
                        let n = pick(i);
                        let mut reports = Vec::new();
                        let got = db.revoke(n, Rights(r), include_self, &mut |x| reports.push(x));
                        if !model.nodes.contains_key(&n) {
                            prop_assert_eq!(got, Err(MapDbError::InvalidNode));
                        } else {
                            prop_assert_eq!(got, Ok(()));
                            let set: BTreeSet<_> = reports.iter().map(|x| (x.node, x.space, x.vpage, x.frame, x.new_rights.0)).collect();
                            prop_assert_eq!(set.len(), reports.len(), "a node was reported twice");
                            prop_assert_eq!(set, model.revoke(n, Rights(r & 7), include_self));
                        }
                    }
                    Op::Stale(id) => {
                        if !model.nodes.contains_key(&id) {
                            prop_assert_eq!(db.map(id, 0, 0, Rights::R), Err(MapDbError::InvalidNode));
                            prop_assert_eq!(db.grant(id, 0, 0, Rights::R), Err(MapDbError::InvalidNode));
                            prop_assert!(db.get(id).is_none());
                            prop_assert_eq!(db.children(id).count(), 0);
                        }
                    }
                }
                check(&db, &model)?;
            }
        }
    }
}
