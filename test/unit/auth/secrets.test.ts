import { describe, expect, it } from "vitest";
import { decryptSecret, deriveSecretKey, encryptSecret, secretKeyFromBytes } from "@/server/auth/secrets";

describe("secret box (AES-256-GCM)", () => {
  const key = deriveSecretKey("a-configured-secret-value");

  it("round-trips and uses a fresh IV every time", () => {
    const a = encryptSecret(key, "sk-123", "ctx");
    const b = encryptSecret(key, "sk-123", "ctx");
    expect(a).not.toBe(b);
    expect(decryptSecret(key, a, "ctx")).toBe("sk-123");
    expect(decryptSecret(key, b, "ctx")).toBe("sk-123");
    expect(a).not.toContain("sk-123");
  });

  it("rejects tampering, a wrong context and a wrong key", () => {
    const sealed = encryptSecret(key, "sk-123", "ctx");
    const [v, iv, tag, ct] = sealed.split(".");
    const flipped = Buffer.from(ct!, "base64url");
    flipped[0] = flipped[0]! ^ 1;
    expect(() => decryptSecret(key, [v, iv, tag, flipped.toString("base64url")].join("."), "ctx")).toThrow(
      /authentication failed/,
    );
    expect(() => decryptSecret(key, sealed, "other-ctx")).toThrow(/authentication failed/);
    expect(() => decryptSecret(deriveSecretKey("another-configured-secret"), sealed, "ctx")).toThrow(
      /authentication failed/,
    );
    expect(() => decryptSecret(key, "v0.x.y.z", "ctx")).toThrow(/unknown secret format/);
  });

  it("derives a stable 32-byte key and accepts only 32 raw bytes", () => {
    expect(deriveSecretKey("a-configured-secret-value").equals(key)).toBe(true);
    expect(key.length).toBe(32);
    expect(() => deriveSecretKey("short")).toThrow();
    expect(() => secretKeyFromBytes(Buffer.alloc(16))).toThrow(/32 bytes/);
    const raw = secretKeyFromBytes(Buffer.alloc(32, 1));
    expect(decryptSecret(raw, encryptSecret(raw, "x", "c"), "c")).toBe("x");
  });
});
