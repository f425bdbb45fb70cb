import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SkillStore } from "@/server/workspace/skills/skill-store";
import { backendFor, tarOf, VALID_SKILL_MD, type TarFixtureEntry } from "./support/archives";

/**
 * Dedupe without hashing every install: the index keeps each skill's shape, and contents are compared
 * only against entries of the same shape (read back from disk on the direct path).
 */
describe("skill dedupe by shape, then content", () => {
  let base: string;
  let workdir: string;
  const indexFile = () => path.join(workdir, "skills", "a", ".content-index.json");

  beforeEach(async () => {
    base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-skill-dedup-")));
    workdir = path.join(base, "ws");
    await fs.mkdir(workdir);
  });
  afterEach(async () => {
    await fs.rm(base, { recursive: true, force: true });
  });

  const skill = (data: string): TarFixtureEntry[] => [
    { name: "s/SKILL.md", content: VALID_SKILL_MD("s") },
    { name: "s/data.txt", content: data },
  ];
  async function install(store: SkillStore, entries: TarFixtureEntry[]) {
    return store.installArchive(Readable.from([await tarOf(entries)]), "tar", "a");
  }
  async function storeFor(sink: "direct host writes" | "tar re-pack") {
    const store = new SkillStore({ machine: backendFor(sink, workdir) });
    await store.initialize();
    return store;
  }

  it("same shape, different bytes: not a duplicate; same bytes: a duplicate (direct path, read back)", async () => {
    const store = await storeFor("direct host writes");
    const first = await install(store, skill("aaaa"));
    const index = JSON.parse(await fs.readFile(indexFile(), "utf8")) as {
      skills: Record<string, { shape?: string; hash?: string }>;
    };
    // The direct path records the shape and hashes nothing until a same-shape install comes along.
    expect(index.skills[first.skill.dir]).toMatchObject({ shape: expect.any(String) });
    expect(index.skills[first.skill.dir]?.hash).toBeUndefined();

    const other = await install(store, skill("bbbb"));
    expect(other.deduplicated).toBe(false);
    const again = await install(store, skill("aaaa"));
    expect(again).toMatchObject({ deduplicated: true, skill: { dir: first.skill.dir } });
  });

  it("an installed skill edited since (same size) no longer matches its original", async () => {
    const store = await storeFor("direct host writes");
    const first = await install(store, skill("aaaa"));
    await fs.writeFile(path.join(workdir, "skills", "a", first.skill.dir, "data.txt"), "zzzz");
    expect((await install(store, skill("aaaa"))).deduplicated).toBe(false);
  });

  it("re-packed installs store the content hash, and entries with only a hash (older indexes) still match", async () => {
    const repack = await storeFor("tar re-pack");
    const first = await install(repack, skill("cccc"));
    const index = JSON.parse(await fs.readFile(indexFile(), "utf8")) as {
      skills: Record<string, { shape?: string; hash?: string; name: string }>;
    };
    expect(index.skills[first.skill.dir]?.hash).toMatch(/^[0-9a-f]{64}$/);
    // An index written before shapes existed.
    delete index.skills[first.skill.dir]!.shape;
    await fs.writeFile(indexFile(), JSON.stringify(index));

    const direct = await storeFor("direct host writes");
    expect(await install(direct, skill("cccc"))).toMatchObject({
      deduplicated: true,
      skill: { dir: first.skill.dir },
    });
    expect((await install(direct, skill("dddd"))).deduplicated).toBe(false);
  });
});
