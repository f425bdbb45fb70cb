import { z } from "zod";
import { AppError, isAppError } from "@/server/shared/errors";

/**
 * A create's idempotency key (one per form submission or per API call): the same key from the same caller
 * returns what the first request created instead of creating again (a double-clicked button, a retry after a
 * lost answer). Same alphabet as chat.send's key.
 */
export const ZIdempotencyKey = z
  .string()
  .regex(/^[A-Za-z0-9._:-]{8,128}$/, "8 to 128 letters, digits, '.', '_', ':' or '-'");

/** How long a key answers with its first result; after it, the key is refused (use a new one per create). */
const IDEMPOTENCY_WINDOW_MS = 24 * 3600_000;

/**
 * The stored form of a key: `<actor>:<key>`, unique per tenant (a unique column on the created row), so two
 * callers' equal keys never meet and a concurrent second insert fails on the index instead of duplicating.
 */
export function scopedCreateKey(
  scope: { readonly apiKeyId: string | null; readonly userId: string | null },
  key: string,
): string {
  const actor = scope.apiKeyId ? `key_${scope.apiKeyId}` : `user_${scope.userId ?? "anonymous"}`;
  return `${actor}:${key}`;
}

/** What a data function throws when a keyed insert lost to a concurrent one with the same key. */
const CREATE_KEY_TAKEN = "idempotency_key_taken";

export function createKeyTaken(): AppError {
  return new AppError("CONFLICT", "a concurrent create with the same idempotency key won", {
    userMessage: "The same request is already being handled; retry to get its result.",
    details: { reason: CREATE_KEY_TAKEN },
  });
}

/** Whether `error` is `createKeyTaken()`: the caller then answers with the winner's result. */
export function isCreateKeyTaken(error: unknown): boolean {
  return isAppError(error) && error.details?.reason === CREATE_KEY_TAKEN;
}

/** Throws when the key's first use is older than the window: it names another, forgotten create. */
export function assertKeyInWindow(firstUse: Date, now = Date.now()): void {
  if (now - firstUse.getTime() <= IDEMPOTENCY_WINDOW_MS) return;
  throw new AppError("CONFLICT", "idempotency key reused after its 24-hour window", {
    userMessage: "This idempotency key was used more than 24 hours ago: send a new key for a new create.",
  });
}

/**
 * One keyed create: without a key it just creates; with one, an earlier create with the same scoped key
 * answers instead (inside the window), and a create that fails while a concurrent one with the same key won
 * (the unique `create_key` index, or another unique column such as a name, refused the loser) answers with
 * the winner. Any failure is looked up again: when a row with this key exists, it was made by the same caller
 * with the same key, so it is the answer whatever the loser's own error was.
 */
export async function createOnce<T>(
  createKey: string | null,
  steps: {
    /** What the create with this key made, and when; null when there is none. */
    readonly earlier: (createKey: string) => Promise<{ readonly result: T; readonly createdAt: Date } | null>;
    readonly create: (createKey: string | null) => Promise<T>;
  },
): Promise<T> {
  if (createKey === null) return steps.create(null);
  const replayed = async (): Promise<T | null> => {
    const first = await steps.earlier(createKey);
    if (!first) return null;
    assertKeyInWindow(first.createdAt);
    return first.result;
  };
  const earlier = await replayed();
  if (earlier !== null) return earlier;
  try {
    return await steps.create(createKey);
  } catch (error) {
    const winner = await replayed().catch(() => null);
    if (winner !== null) return winner;
    throw error;
  }
}
