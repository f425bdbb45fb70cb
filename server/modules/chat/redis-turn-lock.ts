import type { Redis } from "ioredis";
import type { TurnLock } from "./turn-registry";

/**
 * The cross-process `TurnLock` on Redis: `SET <prefix>:turn:<sid> <owner> NX PX ttl` takes a session,
 * compare-and-set scripts renew and release it (only the owner's token matches, so an expired lock taken by
 * another process is never extended or deleted by the old owner), and cancel requests travel on the
 * pub/sub channel `<prefix>:turn-cancel:<sid>` to whichever process runs the turn.
 */
const RENEW_SCRIPT = `if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`;
const RELEASE_SCRIPT = `if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0`;

export type RedisTurnLockOptions = {
  /** Commands (SET/EVAL/PUBLISH). */
  redis: Redis;
  /** A dedicated connection: once subscribed, ioredis allows only (un)subscribe on it. */
  subscriber: Redis;
  prefix: string;
};

export class RedisTurnLock implements TurnLock {
  private readonly listeners = new Map<string, Set<() => void>>();
  private readonly onMessage = (channel: string) => {
    for (const listener of this.listeners.get(channel) ?? []) listener();
  };

  constructor(private readonly options: RedisTurnLockOptions) {
    options.subscriber.on("message", this.onMessage);
  }

  private lockKey(sessionId: string): string {
    return `${this.options.prefix}:turn:${sessionId}`;
  }

  private cancelChannel(sessionId: string): string {
    return `${this.options.prefix}:turn-cancel:${sessionId}`;
  }

  async acquire(sessionId: string, ownerId: string, ttlMs: number): Promise<boolean> {
    const result = await this.options.redis.set(this.lockKey(sessionId), ownerId, "PX", ttlMs, "NX");
    return result === "OK";
  }

  async renew(sessionId: string, ownerId: string, ttlMs: number): Promise<boolean> {
    const result = await this.options.redis.eval(RENEW_SCRIPT, 1, this.lockKey(sessionId), ownerId, ttlMs);
    return result === 1;
  }

  async release(sessionId: string, ownerId: string): Promise<void> {
    await this.options.redis.eval(RELEASE_SCRIPT, 1, this.lockKey(sessionId), ownerId);
  }

  async requestCancel(sessionId: string): Promise<boolean> {
    if ((await this.options.redis.exists(this.lockKey(sessionId))) === 0) return false;
    const receivers = await this.options.redis.publish(this.cancelChannel(sessionId), "cancel");
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
        await this.options.subscriber.subscribe(channel);
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
        void this.options.subscriber.unsubscribe(channel).catch(() => undefined);
      }
    };
  }

  close(): void {
    this.options.subscriber.off("message", this.onMessage);
  }
}
