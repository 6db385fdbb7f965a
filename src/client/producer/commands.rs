//! The queue from the producer's handles to its sender task.
//!
//! One lock-protected queue, shared by every handle, and a wake-up that is
//! sent only when the queue goes from empty to non-empty. The sender takes
//! the whole queue in one swap, so a burst of `send` calls costs it one
//! lock and one wake-up, not one per record.
//!
//! It replaces a tokio unbounded channel, whose every `send` woke the
//! receiving task (an atomic exchange on a line the sender thread also
//! writes, and often a futex wake-up): at 100 B records those wake-ups were
//! about a tenth of the producer's CPU (docs/BENCHMARKS.md, "Session 18").
//!
//! Semantics kept from the channel: commands arrive in call order; once
//! the last handle is dropped the receiver sees the end after taking what
//! was queued; once the receiver is dropped, `send` gives the command back
//! and anything queued is dropped (the delivery futures of queued records
//! then resolve to [`ProducerError::Closed`](super::ProducerError::Closed)).

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Wakes the receiver. `notify_one` keeps a permit when the receiver is
    /// not waiting, so a command pushed between the receiver's look at the
    /// queue and its wait is not missed.
    wake: Notify,
}

struct State<T> {
    queue: VecDeque<T>,
    /// The sending handle is gone: nothing more will arrive.
    senders_gone: bool,
    /// The receiver is gone: sends fail.
    receiver_gone: bool,
}

/// The handles' end (one, held by the producer's shared state).
pub(crate) struct CommandSender<T> {
    shared: Arc<Shared<T>>,
}

/// The sender task's end.
pub(crate) struct CommandReceiver<T> {
    shared: Arc<Shared<T>>,
    /// Commands taken from the queue and not yet handed out; swapped with
    /// the shared queue when empty, so both keep their capacity.
    taken: VecDeque<T>,
}

/// A queue: its sending end and its receiving end.
pub(crate) fn command_queue<T>() -> (CommandSender<T>, CommandReceiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            senders_gone: false,
            receiver_gone: false,
        }),
        wake: Notify::new(),
    });
    (
        CommandSender {
            shared: shared.clone(),
        },
        CommandReceiver {
            shared,
            taken: VecDeque::new(),
        },
    )
}

impl<T> CommandSender<T> {
    /// Queues `command`, or gives it back if the receiver is gone.
    pub(crate) fn send(&self, command: T) -> Result<(), T> {
        let mut state = self.shared.state.lock();
        if state.receiver_gone {
            return Err(command);
        }
        let was_empty = state.queue.is_empty();
        state.queue.push_back(command);
        drop(state);
        // A non-empty queue has already woken the receiver, which takes
        // everything queued when it gets to it.
        if was_empty {
            self.shared.wake.notify_one();
        }
        Ok(())
    }
}

impl<T> Drop for CommandSender<T> {
    fn drop(&mut self) {
        self.shared.state.lock().senders_gone = true;
        self.shared.wake.notify_one();
    }
}

impl<T> CommandReceiver<T> {
    /// The next command without waiting: `None` when nothing is queued (or
    /// the senders are gone; [`CommandReceiver::recv`] tells the two apart).
    pub(crate) fn try_recv(&mut self) -> Option<T> {
        if let Some(c) = self.taken.pop_front() {
            return Some(c);
        }
        std::mem::swap(&mut self.taken, &mut self.shared.state.lock().queue);
        self.taken.pop_front()
    }

    /// The next command; `None` once the senders are gone and everything
    /// they queued was taken. Cancel-safe: a command is only removed from
    /// the queue when it is returned.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        loop {
            if let Some(c) = self.taken.pop_front() {
                return Some(c);
            }
            {
                let mut state = self.shared.state.lock();
                std::mem::swap(&mut self.taken, &mut state.queue);
                if self.taken.is_empty() && state.senders_gone {
                    return None;
                }
            }
            if let Some(c) = self.taken.pop_front() {
                return Some(c);
            }
            self.shared.wake.notified().await;
        }
    }
}

impl<T> Drop for CommandReceiver<T> {
    fn drop(&mut self) {
        let queued = {
            let mut state = self.shared.state.lock();
            state.receiver_gone = true;
            std::mem::take(&mut state.queue)
        };
        // Dropped outside the lock: a command's drop may run other code
        // (a delivery channel closing wakes its future).
        drop(queued);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn commands_arrive_in_order_and_the_end_after_them() {
        let (tx, mut rx) = command_queue();
        for i in 0..5 {
            tx.send(i).unwrap();
        }
        assert_eq!(rx.recv().await, Some(0));
        tx.send(5).unwrap();
        drop(tx);
        let mut rest = Vec::new();
        while let Some(c) = rx.recv().await {
            rest.push(c);
        }
        assert_eq!(rest, vec![1, 2, 3, 4, 5]);
        assert_eq!(rx.try_recv(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_receiver_wakes_for_a_command() {
        let (tx, mut rx) = command_queue::<u32>();
        let waiter = tokio::spawn(async move {
            let first = rx.recv().await;
            let second = rx.recv().await;
            (first, second)
        });
        tokio::task::yield_now().await;
        tx.send(7).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        tx.send(8).unwrap();
        assert_eq!(waiter.await.unwrap(), (Some(7), Some(8)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_command_sent_while_the_receiver_looks_is_not_missed() {
        // The receiver looks at an empty queue, then a command arrives
        // before it waits: the kept permit wakes it.
        let (tx, mut rx) = command_queue::<u32>();
        assert_eq!(rx.try_recv(), None);
        tx.send(1).unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(1), rx.recv()).await;
        assert_eq!(got, Ok(Some(1)));
    }

    #[test]
    fn sends_fail_once_the_receiver_is_gone_and_queued_commands_are_dropped() {
        let (tx, rx) = command_queue::<Arc<()>>();
        let queued = Arc::new(());
        tx.send(queued.clone()).unwrap();
        drop(rx);
        assert_eq!(
            Arc::strong_count(&queued),
            1,
            "the queued command was dropped"
        );
        assert!(tx.send(Arc::new(())).is_err());
    }
}
