import { describe, expect, it } from "vitest";
import { parsePreviewPath, previewUrl } from "@/server/modules/preview/preview-path";
import {
  MAX_SHARE_TTL_MS,
  previewShareKey,
  signPreviewToken,
  verifyPreviewToken,
} from "@/server/modules/preview/preview-token";
import { tunnelPort } from "@/server/workspace/gateway/server/gateway-tunnel-server";

const key = previewShareKey("a-test-secret-of-enough-length-0123456789");
const target = { workspaceId: "ws_1", port: 3000 };
const now = new Date("2030-01-01T00:00:00Z");
const inAnHour = new Date(now.getTime() + 3_600_000);

describe("preview share tokens", () => {
  it("verify for their target until they expire", () => {
    const token = signPreviewToken(key, target, inAnHour);
    expect(verifyPreviewToken(key, target, token, now)?.getTime()).toBe(inAnHour.getTime());
    expect(verifyPreviewToken(key, target, token, new Date(inAnHour.getTime() + 1))).toBeNull();
  });

  it("refuse another port, workspace or key, and any tampering", () => {
    const token = signPreviewToken(key, target, inAnHour);
    expect(verifyPreviewToken(key, { ...target, port: 3001 }, token, now)).toBeNull();
    expect(verifyPreviewToken(key, { ...target, workspaceId: "ws_2" }, token, now)).toBeNull();
    expect(
      verifyPreviewToken(previewShareKey("another-secret-of-enough-length-000"), target, token, now),
    ).toBeNull();
    const [expiry, mac] = token.split(".") as [string, string];
    // A later expiry under the same MAC, a flipped MAC character, junk.
    expect(verifyPreviewToken(key, target, `${Number(expiry) + 60}.${mac}`, now)).toBeNull();
    expect(
      verifyPreviewToken(key, target, `${expiry}.${mac.slice(0, -1)}${mac.endsWith("A") ? "B" : "A"}`, now),
    ).toBeNull();
    expect(verifyPreviewToken(key, target, "", now)).toBeNull();
    expect(verifyPreviewToken(key, target, "1.2.3", now)).toBeNull();
  });

  it("are not honoured for longer than the maximum lifetime", () => {
    const far = new Date(now.getTime() + MAX_SHARE_TTL_MS * 2);
    expect(verifyPreviewToken(key, target, signPreviewToken(key, target, far), now)).toBeNull();
  });
});

describe("preview paths", () => {
  it("split /p/<workspace>/<port>/<rest> and take the share token out of the query", () => {
    expect(parsePreviewPath("/p/ws_1/3000/a/b?x=1&berth_share=tok&y=2")).toEqual({
      workspaceId: "ws_1",
      port: 3000,
      upstreamPath: "/a/b?x=1&y=2",
      shareToken: "tok",
      cookiePath: "/p/ws_1/3000/",
      needsSlash: false,
    });
    expect(parsePreviewPath("/p/ws_1/3000/")).toMatchObject({ upstreamPath: "/", shareToken: null });
    expect(parsePreviewPath("/p/ws_1/3000")).toMatchObject({ needsSlash: true });
  });

  it("refuse ports outside 1024–65535, odd spellings and bad ids", () => {
    for (const bad of [
      "/p/ws/80/",
      "/p/ws/1023/",
      "/p/ws/65536/",
      "/p/ws/03000/",
      "/p/ws/3e3/",
      "/p/ws/abc/",
      "/p/w%2Fs/3000/",
      "/p//3000/",
      "/api/x",
    ]) {
      expect(parsePreviewPath(bad)).toBeNull();
    }
    expect(parsePreviewPath("/p/ws/3000/?berth_share=%E0%A4%A")?.shareToken).toBe("");
  });

  it("build absolute URLs on Berth's origin", () => {
    expect(previewUrl("https://berth.example", target)).toBe("https://berth.example/p/ws_1/3000/");
    expect(previewUrl("https://berth.example", target, "1.a")).toBe(
      "https://berth.example/p/ws_1/3000/?berth_share=1.a",
    );
  });
});

describe("the gateway's tunnel port check", () => {
  it("takes 1024–65535 except its own port", () => {
    expect(tunnelPort("/tunnel?port=3000", [])).toBe(3000);
    for (const url of [
      "/tunnel?port=22",
      "/tunnel?port=70000",
      "/tunnel?port=",
      "/tunnel",
      "/tunnel?port=5600",
    ]) {
      expect(() => tunnelPort(url, [5600])).toThrow(/not allowed/);
    }
  });
});
