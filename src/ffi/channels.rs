//! What the owner tells every channel of its bdev, one
//! `spdk_for_each_channel` at a time: the bypass route (bypass.rs) while
//! the engine passes every request through, none otherwise, and to give
//! back their lanes' channels to a removed bdev.

use super::bypass::{Route, LANE_SLOTS};
use super::node::{Core, Phase};
use super::sys;
use crate::engine::Engine;

/// A RESET and the requests sent past the engine: it completes only once
/// every channel has answered that none of its own is out (the bdev layer
/// lets no new request start while a reset is in progress).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ResetDrain {
    #[default]
    None,
    /// Asked for; the next iteration over the channels drains them.
    Wanted,
    /// That iteration is under way.
    Running,
}

/// Where the owner is with the channels: what it last told them
/// (`bypass`: send requests past the engine, bypass.rs) and whether that
/// telling is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelsState {
    /// Every channel holds what the node wanted when it last told them.
    Settled { bypass: bool },
    /// An iteration over the channels is under way.
    Updating { bypass: bool },
}

/// What the owner tells the channels, and what it has yet to tell them.
#[derive(Clone, Copy, Debug)]
pub struct Channels {
    pub state: ChannelsState,
    /// A backing or cache bdev was removed: the lanes give their channels
    /// to it back at the next update.
    pub lanes_to_drop: bool,
}

impl Default for Channels {
    fn default() -> Self {
        Channels { state: ChannelsState::Settled { bypass: false }, lanes_to_drop: false }
    }
}

impl Core {
    /// On the owner, after every pass of its loop: tells the channels, one
    /// iteration at a time, to take a route while the engine passes every
    /// request through (and the bdev is registered) and none otherwise, and
    /// to give back their channels to a removed bdev; then starts a switch
    /// away from passthrough once no bypassed request is out.
    pub(super) fn update_channels(&mut self) {
        let settled = match self.channels.state {
            ChannelsState::Settled { bypass } => Some(bypass),
            ChannelsState::Updating { .. } => None,
        };
        let may_update = self.bdev.channels_may_update().zip(settled);
        if let Some((glue, bypass_on)) = may_update {
            let wanted = self.bypass_wanted();
            let drain = self.requests.reset_drain == ResetDrain::Wanted;
            if wanted != bypass_on || self.channels.lanes_to_drop || drain {
                let route = wanted.then(|| Route::new(self.bases.backing().glue(), self.config.block_size));
                self.node().shared.bypass.set_wanted(route, self.dropped_lane_slots(), drain);
                if drain {
                    self.requests.reset_drain = ResetDrain::Running;
                }
                if wanted != bypass_on {
                    let how = if wanted { "straight to the backing bdev" } else { "through the engine" };
                    log::info!("{}: requests go {how}", self.params.name);
                }
                self.channels = Channels { state: ChannelsState::Updating { bypass: wanted }, lanes_to_drop: false };
                // SAFETY: glue is the registered bdev; its destruct is not
                // ended while the iteration runs (channels_updating).
                unsafe { sys::hhc_glue_node_update_channels(glue) };
            }
        }
        if self.requests.reset_drain == ResetDrain::Wanted && self.bdev.channels_may_update().is_none() {
            // No iteration can start on a bdev going away: its channels
            // drain as they go.
            self.requests.release_resets();
        }
        self.start_wanted_policy();
    }

    fn bypass_wanted(&self) -> bool {
        let backing = self.bases.backing();
        if self.phase != Phase::Running || self.bdev.node_ends() || self.policy_on_start.is_some() || backing.removed {
            return false;
        }
        self.direct.is_some() || self.engine.as_ref().is_some_and(Engine::passes_through)
    }

    /// Lane slot 0 is the backing bdev, slot 1 the cache (base indexes too).
    fn dropped_lane_slots(&self) -> [bool; LANE_SLOTS] {
        let removed = |index: usize| self.bases.all().get(index).is_some_and(|b| b.removed);
        [removed(0), removed(1)]
    }

    /// The iteration of `update_channels` completed on every channel.
    pub(super) fn channels_updated(&mut self) {
        let ChannelsState::Updating { bypass } = self.channels.state else {
            panic!("{}: the channels answered an update none was telling them", self.params.name)
        };
        self.channels.state = ChannelsState::Settled { bypass };
        if self.requests.reset_drain == ResetDrain::Running {
            self.requests.release_resets();
        }
        if self.bdev.destruct_waited() {
            self.begin_destruct();
        }
    }

    /// A RESET came while requests may be out past the engine: it is held
    /// until an iteration over the channels has seen each of them back.
    pub(super) fn drain_bypass_for_reset(&mut self) {
        if self.requests.reset_drain == ResetDrain::None {
            self.requests.reset_drain = ResetDrain::Wanted;
        }
    }

    /// No request is out past the engine, nor can one start.
    pub(super) fn bypass_drained(&self) -> bool {
        self.channels.state == ChannelsState::Settled { bypass: false }
    }

    /// An iteration over the channels is under way: the bdev's destruct
    /// waits for it (SPDK refuses to unregister an io_device meanwhile),
    /// and so does the close of a removed backing bdev a route may name.
    pub(super) fn channels_updating(&self) -> bool {
        matches!(self.channels.state, ChannelsState::Updating { .. })
    }
}
