import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { AppError } from "@/server/shared/errors";

/**
 * Secrets at rest (agent model API keys): AES-256-GCM with a random 96-bit IV per value. The key
 * is always a parameter; only composition roots derive it from config. `context` is bound as
 * additional authenticated data, so a ciphertext copied to another tenant's row fails to decrypt.
 */
export type SecretKey = Buffer & { readonly __brand: "SecretKey" };

const VERSION = "v1";
const IV_BYTES = 12;

/** Wraps a configured 32-byte key (e.g. `config.secrets.encryptionKey`, BERTH_ENCRYPTION_KEY). */
export function secretKeyFromBytes(bytes: Uint8Array): SecretKey {
  if (bytes.length !== 32) throw new Error(`secretKeyFromBytes: need 32 bytes, got ${bytes.length}`);
  return Buffer.from(bytes) as SecretKey;
}

/** Derives the 32-byte encryption key from a configured secret (e.g. BERTH_SECRET / the auth secret). */
export function deriveSecretKey(secret: string): SecretKey {
  if (secret.length < 16) throw new Error("deriveSecretKey: the secret must be at least 16 characters");
  // HKDF with a fixed info string gives this key its own domain: the same configured secret can
  // also sign auth cookies without the two uses ever sharing key material.
  return Buffer.from(hkdfSync("sha256", secret, "berth", "berth:secret-box:v1", 32)) as SecretKey;
}

export function encryptSecret(key: SecretKey, plaintext: string, context: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(context, "utf8"));
  const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  const tag = cipher.getAuthTag();
  return [VERSION, iv, tag, ciphertext]
    .map((p) => (typeof p === "string" ? p : p.toString("base64url")))
    .join(".");
}

/** Throws AppError INTERNAL when the value was tampered with, or the key or context is wrong. */
export function decryptSecret(key: SecretKey, sealed: string, context: string): string {
  const [version, iv, tag, ciphertext] = sealed.split(".");
  if (version !== VERSION || !iv || !tag || ciphertext === undefined) {
    throw new AppError("INTERNAL", "decryptSecret: unknown secret format", { userMessage: "Internal error" });
  }
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"));
    decipher.setAAD(Buffer.from(context, "utf8"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, "base64url")), decipher.final()]).toString(
      "utf8",
    );
  } catch (cause) {
    throw new AppError("INTERNAL", "decryptSecret: authentication failed (wrong key or context)", {
      cause,
      userMessage: "Internal error",
    });
  }
}
