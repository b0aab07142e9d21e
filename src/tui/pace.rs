//! The session's clock: how wall time maps to the world's virtual time at the chosen speed,
//! and what one frame inside a wait does with it. The world is shown as of the paced time,
//! never past an instant whose event has not happened yet; the wall clock itself comes from
//! a [`WallClock`], which tests replace with one they move by hand.

use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use super::session::Control;
use crate::clock::SimTime;

/// How long the session waits between two frames inside a wait (keys wake it sooner).
pub const FRAME: Duration = Duration::from_millis(25);

/// The wall clock a session paces the world on.
pub trait WallClock: Send + Sync {
    /// Wall time since the clock's origin.
    fn now(&self) -> Duration;

    /// Waits until `deadline` (on this clock) or until a control arrives, whichever comes
    /// first.
    fn wait(&self, controls: &Receiver<Control>, deadline: Duration) -> Waited;
}

/// How a [`WallClock::wait`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Waited {
    Control(Control),
    /// The deadline came.
    Deadline,
    /// Nobody can send controls any more.
    Disconnected,
}

/// The machine's monotonic clock.
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> SystemClock {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl WallClock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn wait(&self, controls: &Receiver<Control>, deadline: Duration) -> Waited {
        let left = deadline.saturating_sub(self.now());
        let received = if left.is_zero() {
            controls.try_recv().map_err(|e| match e {
                TryRecvError::Empty => RecvTimeoutError::Timeout,
                TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            })
        } else {
            controls.recv_timeout(left)
        };
        match received {
            Ok(c) => Waited::Control(c),
            Err(RecvTimeoutError::Timeout) => Waited::Deadline,
            Err(RecvTimeoutError::Disconnected) => Waited::Disconnected,
        }
    }
}

/// The mapping from wall time to virtual time: `virtual = at_virtual + (wall − at_wall) ×
/// speed`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    at_wall: Duration,
    at_virtual: SimTime,
    /// Virtual seconds per wall second.
    speed: f64,
}

impl Pace {
    /// A speed that is not a positive number counts as 1.
    pub fn new(at_wall: Duration, at_virtual: SimTime, speed: f64) -> Pace {
        Pace {
            at_wall,
            at_virtual,
            speed: if speed.is_finite() && speed > 0.0 {
                speed
            } else {
                1.0
            },
        }
    }

    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Counts from `virtual_now` at `wall` (a step starts, or the clock was held).
    pub fn rebase(&mut self, wall: Duration, virtual_now: SimTime) {
        *self = Pace::new(wall, virtual_now, self.speed);
    }

    /// A new speed from `wall` on; the virtual time reached so far is kept. A speed that is
    /// not a positive number is ignored.
    pub fn set_speed(&mut self, wall: Duration, speed: f64) {
        if speed.is_finite() && speed > 0.0 {
            *self = Pace::new(wall, self.virtual_at(wall), speed);
        }
    }

    /// The virtual time at `wall` (never before the mapping's origin).
    pub fn virtual_at(&self, wall: Duration) -> SimTime {
        let elapsed = wall.saturating_sub(self.at_wall).as_secs_f64() * self.speed;
        self.at_virtual
            .after(Duration::try_from_secs_f64(elapsed).unwrap_or(Duration::MAX / 4))
    }

    /// The wall time at which the virtual time reaches `t`.
    pub fn wall_at(&self, t: SimTime) -> Duration {
        let ahead = t.since(self.at_virtual).as_secs_f64() / self.speed;
        self.at_wall + Duration::try_from_secs_f64(ahead).unwrap_or(Duration::MAX / 4)
    }
}

/// What one frame inside a wait does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// The next instant's time has come: let the world reach it (its event happens there).
    Reach,
    /// Show the world at `at` (whole milliseconds, short of the next instant), then wait
    /// for a key until `until` on the wall clock.
    Show { at: SimTime, until: Duration },
}

/// The frame at `wall` for a world whose next instant is `next`: the paced time if it is
/// short of `next`, else [`Frame::Reach`]. Never later than `next`, so an event is shown
/// only once its time has come, and the wait ends by then.
pub fn frame(pace: &Pace, wall: Duration, next: SimTime) -> Frame {
    let paced = pace.virtual_at(wall);
    let next_at = pace.wall_at(next);
    if paced >= next || next_at <= wall {
        return Frame::Reach;
    }
    // Whole milliseconds: a key's action is recorded in ms, and replays at the same instant.
    let at = SimTime::from_millis(paced.as_duration().as_millis() as u64);
    Frame::Show {
        at,
        until: (wall + FRAME).min(next_at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn virtual_time_follows_the_wall_at_the_speed() {
        let pace = Pace::new(secs(100.0), SimTime::from_secs(20), 10.0);
        assert_eq!(pace.virtual_at(secs(100.0)), SimTime::from_secs(20));
        assert_eq!(pace.virtual_at(secs(102.5)), SimTime::from_secs(45));
        // Before the origin: the origin.
        assert_eq!(pace.virtual_at(secs(50.0)), SimTime::from_secs(20));
        assert_eq!(pace.wall_at(SimTime::from_secs(80)), secs(106.0));
    }

    #[test]
    fn a_bad_speed_counts_as_one() {
        for speed in [0.0, -3.0, f64::NAN, f64::INFINITY] {
            assert_eq!(Pace::new(Duration::ZERO, SimTime::ZERO, speed).speed(), 1.0);
        }
    }

    #[test]
    fn a_new_speed_keeps_the_time_reached() {
        let mut pace = Pace::new(Duration::ZERO, SimTime::ZERO, 1.0);
        pace.set_speed(secs(4.0), 10.0);
        assert_eq!(pace.virtual_at(secs(4.0)), SimTime::from_secs(4));
        assert_eq!(pace.virtual_at(secs(5.0)), SimTime::from_secs(14));
        pace.set_speed(secs(5.0), -1.0);
        assert_eq!(pace.speed(), 10.0);
    }

    #[test]
    fn a_frame_shows_the_paced_time_short_of_the_next_instant() {
        // ×1 from t+0; the next event at t+5s (a pod turns ready).
        let pace = Pace::new(Duration::ZERO, SimTime::ZERO, 1.0);
        let next = SimTime::from_secs(5);
        assert_eq!(
            frame(&pace, secs(1.0), next),
            Frame::Show {
                at: SimTime::from_secs(1),
                until: secs(1.0) + FRAME
            }
        );
        // The last frame before the event waits exactly until its time, not past it.
        assert_eq!(
            frame(&pace, Duration::from_millis(4990), next),
            Frame::Show {
                at: SimTime::from_millis(4990),
                until: secs(5.0)
            }
        );
        assert_eq!(frame(&pace, secs(5.0), next), Frame::Reach);
        assert_eq!(frame(&pace, secs(9.0), next), Frame::Reach);
        // An instant that is now (a wait's end reached): nothing to pace.
        assert_eq!(frame(&pace, Duration::ZERO, SimTime::ZERO), Frame::Reach);
    }

    #[test]
    fn the_shown_time_is_in_whole_milliseconds_and_grows_frame_by_frame() {
        let pace = Pace::new(Duration::ZERO, SimTime::from_secs(21), 10.0);
        let next = SimTime::from_secs(81);
        let shown: Vec<SimTime> = (1..=4)
            .map(
                |i| match frame(&pace, FRAME * i + Duration::from_nanos(7), next) {
                    Frame::Show { at, .. } => at,
                    Frame::Reach => panic!("reached early"),
                },
            )
            .collect();
        assert_eq!(
            shown,
            [21_250, 21_500, 21_750, 22_000].map(SimTime::from_millis)
        );
    }
}
