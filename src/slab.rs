//! A slab of slots reused through a free list: the engine's in-flight
//! operations and requests, and the SPDK module's request table, live here
//! so the hot path does not allocate once warmed up.

pub struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab::with_capacity(0)
    }
}

impl<T> Slab<T> {
    pub fn with_capacity(capacity: usize) -> Self {
        Slab { slots: Vec::with_capacity(capacity), free: Vec::with_capacity(capacity), len: 0 }
    }

    pub fn insert(&mut self, value: T) -> u32 {
        self.len += 1;
        match self.free.pop() {
            Some(key) => {
                self.slots[key as usize] = Some(value);
                key
            }
            None => {
                self.slots.push(Some(value));
                (self.slots.len() - 1) as u32
            }
        }
    }

    pub fn remove(&mut self, key: u32) -> Option<T> {
        let value = self.slots.get_mut(key as usize)?.take()?;
        self.free.push(key);
        self.len -= 1;
        Some(value)
    }

    pub fn get(&self, key: u32) -> Option<&T> {
        self.slots.get(key as usize)?.as_ref()
    }

    pub fn get_mut(&mut self, key: u32) -> Option<&mut T> {
        self.slots.get_mut(key as usize)?.as_mut()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().enumerate().filter(|(_, s)| s.is_some()).map(|(k, _)| k as u32)
    }
}
