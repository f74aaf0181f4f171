//! A node's bdev in the bdev layer, from its registration to its destruct,
//! as one state with checked moves: what the node may do with the bdev
//! (update its channels, unregister it) and whether the node may end.
//! Generic over the C handle so that the moves are tested without SPDK.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BdevState<G> {
    /// Not registered yet.
    Unregistered,
    /// The app thread registers it now: the node stays until it answers
    /// (the bdev will point at the node).
    Registering,
    /// Registered: the bdev layer sends it requests.
    Registered(G),
    /// The node asked for it to be unregistered; the bdev layer's destruct
    /// follows. `served`: false for a bdev registered after the node failed,
    /// which goes at once.
    Unregistering { glue: G, served: bool },
    /// The bdev layer's destruct came (`asked`: after the node's own
    /// unregister); it ends with `destruct_done`. `waits`: it came during an
    /// iteration over the channels and begins when that ends.
    Destructing { glue: G, asked: bool, waits: bool },
    /// A record's bdev, unregistered after it served: the node stays, a
    /// record of a lost cache, until bdev_hhc_recover or bdev_hhc_delete.
    Gone,
    /// None left, or none ever to be: the node ends once it is done.
    Released,
    /// The node ended (`finish_destruct`): it is being freed, and nothing
    /// may end it again.
    Ended,
}

impl<G: Copy + std::fmt::Debug> BdevState<G> {
    pub fn start_registering(&mut self) {
        assert!(matches!(self, BdevState::Unregistered), "bdev registered twice ({self:?})");
        *self = BdevState::Registering;
    }

    /// The app thread registered it while the node was starting.
    pub fn registered(&mut self, glue: G) {
        assert!(matches!(self, BdevState::Unregistered | BdevState::Registering), "bdev registered while {self:?}");
        *self = BdevState::Registered(glue);
    }

    /// The app thread registered it after the node failed: it is
    /// unregistered at once (the caller does).
    pub fn withdraw(&mut self, glue: G) {
        assert!(matches!(self, BdevState::Unregistered | BdevState::Registering), "bdev withdrawn while {self:?}");
        *self = BdevState::Unregistering { glue, served: false };
    }

    /// No bdev is to come: registering it failed, or the node failed before.
    pub fn release(&mut self) {
        assert!(
            matches!(self, BdevState::Unregistered | BdevState::Registering | BdevState::Released),
            "bdev released while {self:?}"
        );
        *self = BdevState::Released;
    }

    /// The node wants its bdev gone: the handle to unregister, if it is
    /// registered; without a bdev (or one still registering, which
    /// `withdraw` handles) nothing is left to wait for.
    pub fn unregister(&mut self) -> Option<G> {
        match *self {
            BdevState::Registered(glue) => {
                *self = BdevState::Unregistering { glue, served: true };
                Some(glue)
            }
            BdevState::Unregistered | BdevState::Gone => {
                *self = BdevState::Released;
                None
            }
            BdevState::Registering
            | BdevState::Unregistering { .. }
            | BdevState::Destructing { .. }
            | BdevState::Released
            | BdevState::Ended => None,
        }
    }

    /// The bdev layer's destruct, or its beginning again after the
    /// iteration it waited for (`waits`: one runs now).
    pub fn destruct(&mut self, waits: bool) {
        let (glue, asked) = match *self {
            BdevState::Registered(glue) => (glue, false),
            BdevState::Unregistering { glue, .. } => (glue, true),
            BdevState::Destructing { glue, asked, .. } => (glue, asked),
            _ => panic!("bdev destructed while {self:?}"),
        };
        *self = BdevState::Destructing { glue, asked, waits };
    }

    /// Whether a destruct waited for the iteration that just ended.
    pub fn destruct_waited(&self) -> bool {
        matches!(self, BdevState::Destructing { waits: true, .. })
    }

    /// The destruct ends: the handle to tell the bdev layer, if one is in
    /// destruct. A record's node stays (`keep_node`), any other ends, once.
    pub fn destruct_done(&mut self, keep_node: bool) -> Option<G> {
        let glue = match *self {
            BdevState::Destructing { glue, waits: false, .. } => Some(glue),
            BdevState::Released | BdevState::Gone if !keep_node => None,
            _ => panic!("bdev destruct ended while {self:?}"),
        };
        *self = if keep_node { BdevState::Gone } else { BdevState::Ended };
        glue
    }

    /// The handle, while the bdev layer has the bdev.
    pub fn glue(&self) -> Option<G> {
        match *self {
            BdevState::Registered(glue) | BdevState::Unregistering { glue, .. } | BdevState::Destructing { glue, .. } => Some(glue),
            _ => None,
        }
    }

    /// The handle, if an iteration over its channels may start: registered,
    /// and not going at the node's asking.
    pub fn channels_may_update(&self) -> Option<G> {
        match *self {
            BdevState::Registered(glue) | BdevState::Destructing { glue, asked: false, .. } => Some(glue),
            _ => None,
        }
    }

    pub fn is_registering(&self) -> bool {
        matches!(self, BdevState::Registering)
    }

    /// The node ends once it is done: its bdev's destruct came, or it has
    /// none to wait for.
    pub fn node_ends(&self) -> bool {
        matches!(self, BdevState::Destructing { .. } | BdevState::Released)
    }

    /// It may end now (a destruct waiting for an iteration may not).
    pub fn node_may_end(&self) -> bool {
        matches!(self, BdevState::Destructing { waits: false, .. } | BdevState::Released)
    }

    /// It served and nobody asked for the node to end: a lost cache leaves
    /// a record.
    pub fn served_and_kept(&self) -> bool {
        matches!(self, BdevState::Registered(_) | BdevState::Unregistering { served: true, .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type State = BdevState<u8>;

    #[test]
    fn served_then_deleted() {
        let mut bdev = State::Unregistered;
        bdev.start_registering();
        assert!(bdev.is_registering() && !bdev.node_ends());
        bdev.registered(7);
        assert_eq!((bdev.glue(), bdev.channels_may_update()), (Some(7), Some(7)));
        assert!(bdev.served_and_kept());
        // bdev_hhc_delete: the bdev layer's destruct, during an iteration.
        bdev.destruct(true);
        assert!(bdev.node_ends() && !bdev.node_may_end() && bdev.destruct_waited());
        assert_eq!(bdev.channels_may_update(), Some(7), "not asked by the node: its channels may still be told");
        bdev.destruct(false);
        assert!(bdev.node_may_end());
        assert_eq!(bdev.destruct_done(false), Some(7));
        assert_eq!(bdev, State::Ended);
        assert!(!bdev.node_ends() && !bdev.node_may_end(), "a node ends once");
    }

    #[test]
    fn a_lost_cache_leaves_a_record_then_it_is_dropped() {
        let mut bdev = State::Registered(3);
        assert_eq!(bdev.unregister(), Some(3));
        assert_eq!(bdev.unregister(), None, "asked once");
        assert!(bdev.served_and_kept() && !bdev.node_ends());
        assert_eq!(bdev.channels_may_update(), None);
        bdev.destruct(false);
        assert_eq!(bdev.destruct_done(true), Some(3));
        assert_eq!((bdev, bdev.glue()), (State::Gone, None));
        assert!(!bdev.node_ends());
        // bdev_hhc_delete or module fini frees the record's node.
        assert_eq!(bdev.destruct_done(false), None);
        assert_eq!(bdev, State::Ended);
    }

    #[test]
    fn registered_after_the_node_failed_goes_at_once() {
        let mut bdev = State::Unregistered;
        bdev.start_registering();
        // The node failed meanwhile: unregister finds nothing to do yet.
        assert_eq!(bdev.unregister(), None);
        assert!(bdev.is_registering() && !bdev.node_may_end());
        bdev.withdraw(9);
        assert!(!bdev.served_and_kept(), "never served: no record");
        bdev.destruct(false);
        assert_eq!(bdev.destruct_done(false), Some(9));
    }

    #[test]
    fn a_node_failed_in_creation_ends_without_a_bdev() {
        let mut bdev = State::Unregistered;
        bdev.release();
        assert!(bdev.node_may_end());
        assert_eq!(bdev.destruct_done(false), None);
        let mut bdev = State::Registering;
        bdev.release();
        assert!(bdev.node_may_end());
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn registering_twice_is_refused() {
        State::Registered(1).start_registering();
    }

    #[test]
    #[should_panic(expected = "destructed while Unregistered")]
    fn a_destruct_without_a_bdev_is_refused() {
        State::Unregistered.destruct(false);
    }

    #[test]
    #[should_panic(expected = "destruct ended while Destructing")]
    fn a_destruct_waiting_for_an_iteration_does_not_end() {
        let mut bdev = State::Registered(1);
        bdev.destruct(true);
        bdev.destruct_done(false);
    }

    #[test]
    #[should_panic(expected = "destruct ended while Ended")]
    fn a_node_ends_once() {
        let mut bdev = State::Released;
        bdev.destruct_done(false);
        bdev.destruct_done(false);
    }

    #[test]
    #[should_panic(expected = "released while Registered")]
    fn a_registered_bdev_is_not_released_without_its_destruct() {
        State::Registered(1).release();
    }
}
