import type { Redis } from "ioredis";
import { onChannelMessage, publishMessage, subscribeChannel, unsubscribeChannel } from "@/server/redis";
import type { CancelBus } from "./turn-registry";

/**
 * Cancel requests across processes on Redis pub/sub: `chat.cancel` in any process publishes on
 * `<prefix>:turn-cancel:<sid>`, and the process running that session's turn (subscribed while it runs)
 * aborts it. Redis holds no turn state: the one-turn-per-session claim is in Postgres (chat-turn.data.ts).
 */
export type RedisCancelBusOptions = {
  /** Commands (PUBLISH). */
  redis: Redis;
  /** A dedicated connection: once subscribed, ioredis allows only (un)subscribe on it. */
  subscriber: Redis;
  prefix: string;
};

export class RedisCancelBus implements CancelBus {
  private readonly listeners = new Map<string, Set<() => void>>();
  private readonly stopListening: () => void;

  constructor(private readonly options: RedisCancelBusOptions) {
    this.stopListening = onChannelMessage(options.subscriber, (channel) => {
      for (const listener of this.listeners.get(channel.toString("utf8")) ?? []) listener();
    });
  }

  private cancelChannel(sessionId: string): string {
    return `${this.options.prefix}:turn-cancel:${sessionId}`;
  }

  async requestCancel(sessionId: string): Promise<boolean> {
    const receivers = await publishMessage(this.options.redis, this.cancelChannel(sessionId), "cancel");
    return receivers > 0;
  }

  async onCancelRequested(sessionId: string, listener: () => void): Promise<() => void> {
    const channel = this.cancelChannel(sessionId);
    let set = this.listeners.get(channel);
    const first = !set;
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
    }
    // Registered before the SUBSCRIBE round trip: a message published right after Redis confirms the
    // subscription can be dispatched before this function resumes.
    set.add(listener);
    if (first) {
      try {
        await subscribeChannel(this.options.subscriber, channel);
      } catch (error) {
        set.delete(listener);
        if (set.size === 0) this.listeners.delete(channel);
        throw error;
      }
    }
    return () => {
      const current = this.listeners.get(channel);
      current?.delete(listener);
      if (current?.size === 0) {
        this.listeners.delete(channel);
        void unsubscribeChannel(this.options.subscriber, channel).catch(() => undefined);
      }
    };
  }

  close(): void {
    this.stopListening();
  }
}
