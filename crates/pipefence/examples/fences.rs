//! Fences across threads: a producer thread signals a fence frame by frame; the main thread
//! waits with a timeout, an event and an async future; a queue waits on the CPU's signal and
//! signals back (a CPU -> GPU -> CPU round trip).
//!
//! Run: `cargo run --release -p pipefence --example fences`

use pipefence::FenceDesc;
use pipefence::{Device, DeviceDesc, Event, QueueDesc, QueueKind};
use std::time::{Duration, Instant};

fn main() -> pipefence::Result<()> {
    let device = Device::new(DeviceDesc::default())?;
    let frame = device.create_fence(&FenceDesc::new(0).named("frame"))?;

    // A producer thread signals frames 1..=100; the consumer waits for each.
    let producer = {
        let frame = frame.clone();
        std::thread::spawn(move || -> pipefence::Result<()> {
            for v in 1..=100 {
                frame.signal(v)?;
            }
            Ok(())
        })
    };
    let start = Instant::now();
    frame.wait(100, Duration::from_secs(10))?;
    producer.join().expect("producer thread")?;
    println!(
        "waited for 100 signals from another thread in {:?}",
        start.elapsed()
    );

    // An event fires once, on crossing.
    let event = Event::new();
    frame.set_event_on_completion(101, Some(&event))?;
    frame.signal(101)?;
    assert!(event.wait(Duration::from_secs(1)));
    println!("event fired at {}", frame.completed_value());

    // A CPU -> GPU -> CPU round trip: the queue waits on `go`, then signals `back`.
    let queue = device.create_queue(&QueueDesc::new(QueueKind::Compute, "async"))?;
    let go = device.create_fence(&FenceDesc::new(0).named("go"))?;
    let back = device.create_fence(&FenceDesc::new(0).named("back"))?;
    let start = Instant::now();
    for i in 1..=1000 {
        queue.wait(&go, i)?;
        queue.signal(&back, i)?;
        go.signal(i)?;
        back.wait(i, Duration::from_secs(10))?;
    }
    println!(
        "1000 CPU -> queue -> CPU round trips in {:?}",
        start.elapsed()
    );

    // Device removal releases every waiter (F10).
    let waiter = {
        let back = back.clone();
        std::thread::spawn(move || back.wait(u64::MAX, Duration::from_secs(10)))
    };
    device.remove();
    let r = waiter.join().expect("waiter thread");
    println!(
        "after remove(): waiter returned {r:?}, fence reads {:#x}",
        back.completed_value()
    );
    Ok(())
}
