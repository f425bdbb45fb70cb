/**
 * What a tool call needs to hear of its cancellation: the part of AbortSignal it uses, so an AbortSignal
 * passes as one. The in-sandbox gateway answers many small calls, and an AbortController per call was the
 * largest single cost of a relayed call there (about 25 µs of its ~160 µs on the sandbox's Node 18): it
 * passes a CancelSource instead, and a real AbortSignal is made only where a caller needs one (the SDK).
 */
export interface CancelSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

/** A CancelSignal and the means to abort it; listeners run once, in the order they were added. */
export class CancelSource implements CancelSignal {
  private listeners: Array<() => void> = [];
  private abortReason: unknown = undefined;
  private isAborted = false;

  get aborted(): boolean {
    return this.isAborted;
  }

  get reason(): unknown {
    return this.abortReason;
  }

  addEventListener(_type: "abort", listener: () => void): void {
    if (!this.isAborted) this.listeners.push(listener);
  }

  removeEventListener(_type: "abort", listener: () => void): void {
    const index = this.listeners.indexOf(listener);
    if (index !== -1) this.listeners.splice(index, 1);
  }

  /** Aborts once (later calls do nothing), with the reason AbortController would give. */
  abort(reason: unknown = new DOMException("This operation was aborted", "AbortError")): void {
    if (this.isAborted) return;
    this.isAborted = true;
    this.abortReason = reason;
    const listeners = this.listeners;
    this.listeners = [];
    for (const listener of listeners) {
      try {
        listener();
      } catch (error) {
        // As EventTarget does: the other listeners still run, and the error is reported as uncaught.
        process.nextTick(() => {
          throw error;
        });
      }
    }
  }
}

/** `signal` as an AbortSignal (itself when it is one) for APIs that need the real thing. */
export function toAbortSignal(signal: CancelSignal): AbortSignal {
  if (signal instanceof AbortSignal) return signal;
  const controller = new AbortController();
  if (signal.aborted) controller.abort(signal.reason);
  else signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  return controller.signal;
}
