import { AsyncLocalStorage } from "node:async_hooks";
import { createHmac } from "node:crypto";
import { generateRandomString } from "better-auth/crypto";

/**
 * The plain keys better-auth's api-key plugin stores (as their SHA-256 hash). Random by default (the plugin's
 * own alphabet and length); a create with an idempotency key supplies a key derived from the server's secret
 * instead, so a replay of that create can show the same working key again while only its hash is stored
 * (as invitation links are derived, server/modules/member/invite.service.ts).
 */
const suppliedKey = new AsyncLocalStorage<string>();

/** The plugin's `customKeyGenerator`: the key `withSuppliedApiKey` set for this call, else a random one. */
export function generateApiKey(options: { length: number; prefix: string | undefined }): string {
  return (
    suppliedKey.getStore() ?? `${options.prefix ?? ""}${generateRandomString(options.length, "a-z", "A-Z")}`
  );
}

/** Runs `create` (one plugin createApiKey call) so that the key it stores is `plainKey`. */
export function withSuppliedApiKey<T>(plainKey: string, create: () => Promise<T>): Promise<T> {
  return suppliedKey.run(plainKey, create);
}

const LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/**
 * `prefix` + `length` letters from HMAC-SHA512(secret, label): as unguessable as a random key to anyone
 * without the secret. Bytes at or above 208 (4 x 52) are skipped so every letter is equally likely.
 */
export function deriveApiKey(secret: string, label: string, prefix: string, length = 64): string {
  let letters = "";
  for (let block = 0; letters.length < length; block += 1) {
    const bytes = createHmac("sha512", secret).update(`berth:api-key:v1:${block}:${label}`).digest();
    for (const byte of bytes) {
      if (byte < 208 && letters.length < length) letters += LETTERS[byte % 52];
    }
  }
  return `${prefix}${letters}`;
}
