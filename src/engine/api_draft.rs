// Public surface of the engine (src/engine/mod.rs). Drivers use exactly this.
//
// pub struct Engine { .. }
//
// pub enum StartMode { Format, Open }          // Format: new cache + log; Open: warm restart
// pub enum EngineState { Starting, Ready, Stopping, Stopped, Failed(String) }
//
// impl Engine {
//     pub fn new(config: Config, start: StartMode, alloc: &mut dyn IoAllocator, now: Nanos) -> Result<Engine, ConfigError>;
//     pub fn state(&self) -> &EngineState;
//     pub fn config(&self) -> &Config;
//     pub fn blocks_count(&self) -> u64;              // exposed bdev size in blocks (= backing blocks)
//     // inputs
//     pub fn handle_request(&mut self, now: Nanos, request: Request, data: Option<&dyn RequestData>);
//            // data: Some for writes (the engine copies into log buffers during the call), None otherwise
//     pub fn handle_io_completion(&mut self, now: Nanos, id: IoId, status: IoStatus);
//     pub fn handle_timer(&mut self, now: Nanos);     // background: write-back, commits, reclamation, superblock
//     pub fn handle_device_removed(&mut self, now: Nanos, role: DeviceRole);
//     pub fn handle_mirror_attached(&mut self, now: Nanos, mirror: u8);  // fresh mirror: re-sync
//     pub fn set_policy(&mut self, now: Nanos, policy: Policy);          // drains dirty data first when needed
//     pub fn shutdown(&mut self, now: Nanos);         // clean stop: commit + superblock, then Stopped
//     // outputs
//     pub fn poll_io(&mut self) -> Option<DeviceIo>;
//     pub fn poll_completion(&mut self) -> Option<RequestCompletion>;
//     pub fn next_timer(&self) -> Option<Nanos>;
//     pub fn io_memory_mut(&mut self, region: u32) -> &mut [u8];
//     pub fn stats(&self) -> Stats;
//     pub fn memory_report(&self) -> MemoryReport;
// }
