import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import path from "node:path";
import { PassThrough, type Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import {
  directoryEntries,
  tarEntries,
  zipEntries,
  type ArchiveEntry,
  type ArchiveFormat,
} from "@/server/workspace/archive/archive-entries";
import {
  DEFAULT_ARCHIVE_LIMITS,
  extractToMachine,
  type ArchiveLimits,
} from "@/server/workspace/archive/extract-to-machine";
import { assertLinksInside } from "@/server/workspace/archive/entry-validator";
import { KeyedMutex } from "@/server/workspace/mcp/async-mutex";
import { silentLogger, type EngineLogger } from "@/server/workspace/mcp/types";
import { findDuplicate } from "@/server/workspace/skills/skill-dedup";
import { assertInstallableSkillFields, parseSkillMarkdown } from "@/server/workspace/skills/front-matter";
import {
  resolveSkillRef,
  ZContentIndex,
  type SkillRef,
  type TContentIndex,
} from "@/server/workspace/skills/skill-lookup";
import {
  assertPlainName,
  assignSkillLabels,
  findSkillRoot,
  freeLabel,
  partitionName,
  sanitizeDirName,
} from "@/server/workspace/skills/skill-names";

const SKILLS_DIR = "skills";
const SKILL_SEED_PARTITION = ".seed";
const CONTENT_INDEX_FILE = ".content-index.json";
const MAX_SKILL_MD_BYTES = 1024 * 1024;

export type Skill = {
  /**
   * The agent-facing name, unique in the partition: the front-matter name, or `name (1)`, `name (2)`, ...
   * when another skill there has the same one (see assignSkillLabels).
   */
  name: string;
  /** The front-matter name as written in SKILL.md (several skills may share it). */
  declaredName: string;
  description: string;
  /** Folder name inside the partition: unique and stable there, the safest way to name a skill to remove. */
  dir: string;
  /** Backend path of the skill folder. */
  path: string;
  /** SKILL.md after the front matter. */
  markdown: string;
  metadata: Record<string, unknown>;
  /** SKILL.md mtime (ms). */
  updatedAt: number;
};

export type SkippedSkill = { dir: string; reason: string };
export type SkillListing = { skills: Skill[]; skipped: SkippedSkill[] };
/** `storedBytes`: file bytes the install added to the workspace (0 when an identical skill was there). */
export type SkillInstallResult = { skill: Skill; deduplicated: boolean; storedBytes: number };
export type { SkillRef };

export type SkillStoreOptions = {
  machine: WorkspaceMachine;
  /** Host directories holding a SKILL.md, copied into `skills/.seed` by `initialize` (hash-deduplicated). */
  seedPaths?: readonly string[];
  /** Archive limits; unset fields use DEFAULT_ARCHIVE_LIMITS (500 MiB expanded, 10,000 entries, 500 MiB). */
  limits?: Partial<ArchiveLimits>;
  /** Host directory where zip uploads are spooled (zip needs random access). Default: os.tmpdir(). */
  spoolDir?: string;
  logger?: EngineLogger;
};

/**
 * The skills of a workspace (agentscope-spec.md §3): per-agent partitions `skills/<agentId>/`
 * (`skills/default/` without an agent) equipped once from the seed template `skills/.seed`, installs from
 * host directories and from zip/tar/tar.gz streams. Validated entries are extracted into a staging folder
 * through the WorkspaceMachine (re-packed as a clean tar, or written directly when the backend's files are
 * this host's), then moved into place, so the same code serves the local host and sandboxes.
 */
export class SkillStore {
  private readonly machine: WorkspaceMachine;
  private readonly seedPaths: readonly string[];
  private readonly limits: ArchiveLimits;
  private readonly spoolDir: string | undefined;
  private readonly logger: EngineLogger;
  private readonly equipped = new Set<string>();
  private readonly locks = new KeyedMutex();

  constructor(options: SkillStoreOptions) {
    this.machine = options.machine;
    this.seedPaths = (options.seedPaths ?? []).map((seedPath) => path.resolve(seedPath));
    this.limits = { ...DEFAULT_ARCHIVE_LIMITS, ...options.limits };
    this.spoolDir = options.spoolDir;
    this.logger = options.logger ?? silentLogger;
  }

  /** Creates `skills/.seed` and seeds it from the host skill paths; a bad path is logged and skipped. */
  async initialize(): Promise<void> {
    await this.machine.mkdir(this.partitionDir(SKILL_SEED_PARTITION));
    for (const seedPath of this.seedPaths) {
      if (!existsSync(path.join(seedPath, "SKILL.md"))) {
        this.logger.warn({ seedPath }, "Skill path has no SKILL.md; not seeding it");
        continue;
      }
      try {
        await this.install(directoryEntries(seedPath), SKILL_SEED_PARTITION, {});
      } catch (error) {
        this.logger.warn({ seedPath, error: String(error) }, "Seeding skill failed; skipping it");
      }
    }
  }

  /** Backend path of an agent's partition (`skills/default` when there is no agent). */
  partitionPath(agentId?: string | null): string {
    return this.partitionDir(partitionName(agentId));
  }

  /** The partition's skills (sorted by folder); folders with a missing or invalid SKILL.md are reported as skipped. */
  async list(agentId?: string | null): Promise<SkillListing> {
    const partition = partitionName(agentId);
    await this.equip(partition);
    const dir = this.partitionDir(partition);
    return this.listIn(dir, await this.readIndex(dir));
  }

  /** One skill (agent-facing name, folder, or a front-matter name only one skill has) with its SKILL.md. */
  async read(ref: SkillRef, agentId?: string | null): Promise<{ skill: Skill; content: string }> {
    const skill = await this.find(ref, agentId);
    const content = await this.readText(path.posix.join(skill.path, "SKILL.md"));
    return { skill, content: content ?? "" };
  }

  /** Installs a skill folder from the host (its basename becomes the folder name unless `dirName` is given). */
  async installFromDirectory(
    hostPath: string,
    agentId?: string | null,
    options: { dirName?: string } = {},
  ): Promise<SkillInstallResult> {
    const root = path.resolve(hostPath);
    if (!existsSync(path.join(root, "SKILL.md"))) {
      throw new AppError("BAD_REQUEST", `Invalid skill at ${hostPath}: SKILL.md not found`);
    }
    const partition = partitionName(agentId);
    await this.equip(partition);
    return this.install(directoryEntries(root), partition, options);
  }

  /**
   * Installs a skill from a zip, tar or tar.gz stream without holding it in memory. The first folder
   * holding SKILL.md (shallowest, then archive order; at most MAX_SKILL_ROOT_DEPTH folders below the top)
   * is the skill; everything else is discarded.
   * Limits → PAYLOAD_TOO_LARGE; hostile entries (absolute, `..`, links leaving the skill folder, devices,
   * control characters) → BAD_REQUEST naming the entry. Identical content already installed is returned instead of duplicated.
   */
  async installArchive(
    stream: Readable,
    format: ArchiveFormat,
    agentId?: string | null,
    options: { dirName?: string; limits?: Partial<ArchiveLimits> } = {},
  ): Promise<SkillInstallResult> {
    // A call's limits only lower the store's (a tenant's quota room, a route's upload cap).
    const lower = (key: keyof ArchiveLimits) => Math.min(this.limits[key], options.limits?.[key] ?? Infinity);
    const limits: ArchiveLimits = {
      maxExpandedBytes: lower("maxExpandedBytes"),
      maxEntries: lower("maxEntries"),
      maxArchiveBytes: lower("maxArchiveBytes"),
    };
    if (options.dirName !== undefined) assertPlainName(options.dirName);
    const partition = partitionName(agentId);
    await this.equip(partition);
    const entries =
      format === "zip"
        ? zipEntries(stream, limits, this.spoolDir)
        : tarEntries(stream, format === "tar.gz", limits.maxArchiveBytes);
    return this.install(entries, partition, options, limits);
  }

  /**
   * Deletes a skill. `{ dir }` names exactly one folder. A name must be unambiguous: a suffixed agent-facing
   * name (`helper (1)`), or a front-matter name only one skill has; a name several skills share is a CONFLICT
   * listing them (dir and agent-facing name), never a guess. Unknown → NOT_FOUND.
   */
  async remove(ref: SkillRef, agentId?: string | null): Promise<{ dir: string }> {
    const partition = partitionName(agentId);
    const skill = await this.find(ref, agentId, { strict: true });
    await this.locks.run(partition, async () => {
      await this.machine.remove(skill.path);
      const dir = this.partitionDir(partition);
      const index = await this.readIndex(dir);
      if (index.skills[skill.dir]) {
        delete index.skills[skill.dir];
        await this.writeIndex(dir, index);
      }
    });
    return { dir: skill.dir };
  }

  /** Deletes the agent's partition; the next skill call re-equips it from the seed. */
  async purgeAgent(agentId: string): Promise<void> {
    if (!agentId) return;
    const partition = partitionName(agentId);
    await this.locks.run(partition, async () => {
      this.equipped.delete(partition);
      await this.machine.remove(this.partitionDir(partition));
    });
  }

  private partitionDir(partition: string): string {
    return path.posix.join(this.machine.workdir, SKILLS_DIR, partition);
  }

  /**
   * Copies the seed into a missing partition, once: copy to a temporary folder, then rename into place,
   * so a half-copied partition is never visible. The partition's existence marks it as equipped, so a seed
   * skill the agent deletes stays deleted.
   */
  private async equip(partition: string): Promise<void> {
    if (partition === SKILL_SEED_PARTITION || this.equipped.has(partition)) return;
    await this.locks.run(partition, async () => {
      if (this.equipped.has(partition)) return;
      const target = this.partitionDir(partition);
      if (!(await this.machine.stat(target))) {
        const seed = this.partitionDir(SKILL_SEED_PARTITION);
        if (await this.machine.stat(seed)) {
          const temp = path.posix.join(
            this.machine.workdir,
            SKILLS_DIR,
            `.equipping-${randomBytes(6).toString("hex")}`,
          );
          try {
            // Piped straight away: Node resumes (drains) an exited child's unread stdout, so a backend that
            // returns a child's stdout could lose the archive while putArchive is still setting up.
            const archive = (await this.machine.getArchive(seed)).pipe(new PassThrough());
            await this.machine.putArchive(temp, archive);
            await this.machine.move(path.posix.join(temp, SKILL_SEED_PARTITION), target);
          } catch (error) {
            // Another process may have equipped it first; only a still-missing partition is a failure.
            if (!(await this.machine.stat(target))) throw error;
          } finally {
            await this.machine.remove(temp);
          }
        } else {
          await this.machine.mkdir(target);
        }
      }
      this.equipped.add(partition);
    });
  }

  private async install(
    entries: AsyncIterable<ArchiveEntry>,
    partition: string,
    options: { dirName?: string },
    limits: ArchiveLimits = this.limits,
  ): Promise<SkillInstallResult> {
    const staging = path.posix.join(this.machine.workdir, `.skill-staging-${randomBytes(8).toString("hex")}`);
    try {
      const manifest = await extractToMachine(entries, this.machine, staging, limits);
      const root = findSkillRoot(manifest);
      assertLinksInside(manifest.symlinks, root);
      const rootPath = root ? path.posix.join(staging, root) : staging;
      const text = await this.readText(path.posix.join(rootPath, "SKILL.md"));
      const parsed = text === null ? null : parseSkillMarkdown(text);
      if (!parsed?.ok) {
        throw new AppError("BAD_REQUEST", `Invalid SKILL.md: ${parsed?.reason ?? "larger than 1 MiB"}`, {
          details: { entry: root ? `${root}/SKILL.md` : "SKILL.md" },
        });
      }
      assertInstallableSkillFields(parsed.skill);
      return await this.locks.run(partition, async () => {
        const dir = this.partitionDir(partition);
        const index = await this.readIndex(dir);
        const {
          folder: duplicate,
          shape,
          hash,
        } = await findDuplicate(this.machine, dir, index.skills, {
          manifest,
          root,
          rootPath,
        });
        const current = await this.listIn(dir, index);
        const existing = current.skills.find((skill) => skill.dir === duplicate);
        if (existing) return { skill: existing, deduplicated: true, storedBytes: 0 };
        const base = options.dirName ?? sanitizeDirName(root ? path.posix.basename(root) : parsed.skill.name);
        const folder = await this.freeFolder(dir, base);
        await this.machine.move(rootPath, path.posix.join(dir, folder));
        // The labels the agent sees now are written down (hand-added folders included), so a new skill
        // never takes over an older one's name, whatever its folder sorts as.
        for (const skill of current.skills) {
          index.skills[skill.dir] = {
            ...(index.skills[skill.dir] ?? { name: skill.declaredName }),
            label: skill.name,
          };
        }
        const label = freeLabel(parsed.skill.name, new Set(current.skills.map((skill) => skill.name)));
        index.skills[folder] = { name: parsed.skill.name, shape, ...(hash ? { hash } : {}), label };
        await this.writeIndex(dir, index);
        const installed = (await this.listIn(dir, index)).skills.find((skill) => skill.dir === folder);
        if (!installed) throw new AppError("INTERNAL", `Installed skill ${folder} is unreadable`);
        // The skill root's files only: what sits beside it in the archive goes with the staging folder.
        const prefix = root ? `${root}/` : "";
        const storedBytes = manifest.files
          .filter((file) => file.path.startsWith(prefix))
          .reduce((sum, file) => sum + file.size, 0);
        return { skill: installed, deduplicated: false, storedBytes };
      });
    } finally {
      await this.machine.remove(staging).catch((error: unknown) => {
        this.logger.warn({ staging, error: String(error) }, "Could not delete a skill staging folder");
      });
    }
  }

  /** `base`, then `base-1`, `base-2`, ... until the folder is free (the reference's clash rule). */
  private async freeFolder(dir: string, base: string): Promise<string> {
    for (let suffix = 0; ; suffix += 1) {
      const candidate = suffix === 0 ? base : `${base}-${suffix}`;
      if (!(await this.machine.stat(path.posix.join(dir, candidate)))) return candidate;
    }
  }

  /** Resolves a reference in the partition (see resolveSkillRef). */
  private async find(ref: SkillRef, agentId?: string | null, options: { strict?: boolean } = {}) {
    const { skills } = await this.list(agentId);
    return resolveSkillRef(skills, ref, partitionName(agentId), options.strict ?? false);
  }

  /** The partition's skills (sorted by folder) with their agent-facing names; bad folders as skipped. */
  private async listIn(dir: string, index: TContentIndex): Promise<SkillListing> {
    const entries = await this.machine.list(dir).catch(() => []);
    const folders = entries
      .filter((entry) => entry.type === "directory" && !entry.name.startsWith("."))
      .map((entry) => entry.name)
      .sort();
    const loaded = await Promise.all(folders.map((folder) => this.loadSkill(dir, folder)));
    const listing: SkillListing = { skills: [], skipped: [] };
    for (const result of loaded) {
      if ("reason" in result) listing.skipped.push(result);
      else listing.skills.push(result);
    }
    const labels = assignSkillLabels(
      listing.skills.map((skill) => ({
        dir: skill.dir,
        declaredName: skill.declaredName,
        storedLabel: index.skills[skill.dir]?.label,
      })),
    );
    for (const skill of listing.skills) skill.name = labels.get(skill.dir) ?? skill.declaredName;
    return listing;
  }

  private async loadSkill(dir: string, folder: string): Promise<Skill | SkippedSkill> {
    const skillPath = path.posix.join(dir, folder);
    const file = path.posix.join(skillPath, "SKILL.md");
    const stat = await this.machine.stat(file);
    if (!stat || stat.type !== "file") return { dir: folder, reason: "SKILL.md not found" };
    if (stat.size > MAX_SKILL_MD_BYTES) return { dir: folder, reason: "SKILL.md is larger than 1 MiB" };
    const text = await this.readText(file);
    if (text === null) return { dir: folder, reason: "SKILL.md could not be read" };
    const parsed = parseSkillMarkdown(text);
    if (!parsed.ok) return { dir: folder, reason: parsed.reason };
    const { name, description, metadata, body } = parsed.skill;
    return {
      name,
      declaredName: name,
      description,
      dir: folder,
      path: skillPath,
      markdown: body,
      metadata,
      updatedAt: stat.mtimeMs,
    };
  }

  /** A small text file through the backend; null when missing or over the SKILL.md cap. */
  private async readText(file: string): Promise<string | null> {
    let stream: Readable;
    try {
      stream = await this.machine.readFile(file);
    } catch {
      return null;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_SKILL_MD_BYTES) {
        stream.destroy();
        return null;
      }
      chunks.push(chunk);
    }
    return Buffer.concat(chunks).toString("utf8");
  }

  private async readIndex(dir: string): Promise<TContentIndex> {
    const text = await this.readText(path.posix.join(dir, CONTENT_INDEX_FILE));
    if (text === null) return { version: 1, skills: {} };
    try {
      return ZContentIndex.parse(JSON.parse(text));
    } catch {
      this.logger.warn({ dir }, "Ignoring an unreadable skill content index");
      return { version: 1, skills: {} };
    }
  }

  private async writeIndex(dir: string, index: TContentIndex): Promise<void> {
    const file = path.posix.join(dir, CONTENT_INDEX_FILE);
    const temp = `${file}.tmp-${randomBytes(6).toString("hex")}`;
    await this.machine.writeFile(temp, JSON.stringify(index, null, 2));
    await this.machine.move(temp, file);
  }
}
