import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createReadStream, readFileSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";
import { SkillStore } from "@/server/workspace/skills/skill-store";
import { result, type BenchResult } from "./lib";

/**
 * Skill archive install: a 200 MB tar of incompressible data installed through SkillStore (parse, validate,
 * hash, re-pack, extract through the HostFolderMachine) against plain `tar -x` of the same file, in the same
 * run. Peak RSS growth during the install shows the archive is streamed, never held in memory.
 */
const MB = 1024 * 1024;
const ARCHIVE_MB = 200;
const FILE_MB = 2;
const ROUNDS = 3;
const MEMORY_BUDGET_MB = 64;

export async function run(): Promise<BenchResult[]> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-bench-skills-")));
  try {
    const archive = await buildArchive(root);
    const { size } = await fs.stat(archive);

    let tarMs = Number.POSITIVE_INFINITY;
    let tarCpuMs = Number.POSITIVE_INFINITY;
    let installCpuMs = Number.POSITIVE_INFINITY;
    let installMs = Number.POSITIVE_INFINITY;
    let peakGrowthMb = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const plain = path.join(root, `plain-${round}`);
      await fs.mkdir(plain);
      let cpu = cpuMeter();
      let start = process.hrtime.bigint();
      await spawnOk("tar", ["-x", "-f", archive, "-C", plain]);
      tarMs = Math.min(tarMs, Number(process.hrtime.bigint() - start) / 1e6);
      tarCpuMs = Math.min(tarCpuMs, cpu());
      await fs.rm(plain, { recursive: true, force: true });

      const workdir = path.join(root, `ws-${round}`);
      await fs.mkdir(workdir);
      const store = new SkillStore({ machine: new HostFolderMachine({ workdir }) });
      await store.initialize();
      await store.list("bench"); // equip the partition outside the timed part
      const sampler = rssSampler();
      cpu = cpuMeter();
      start = process.hrtime.bigint();
      const installed = await store.installArchive(
        createReadStream(archive, { highWaterMark: MB }),
        "tar",
        "bench",
      );
      installMs = Math.min(installMs, Number(process.hrtime.bigint() - start) / 1e6);
      installCpuMs = Math.min(installCpuMs, cpu());
      peakGrowthMb = Math.max(peakGrowthMb, sampler.stop() / MB);
      if (installed.deduplicated) throw new Error("fresh workdir: install must not be a dedup hit");
      await fs.rm(workdir, { recursive: true, force: true });
    }

    const sizeMb = size / MB;
    return [
      result({
        name: `skills: install ${Math.round(sizeMb)} MB tar archive (time)`,
        value: installMs,
        unit: "ms",
        baseline: "tar -x of the same archive",
        baselineValue: tarMs,
        goal: "≤ 2×",
      }),
      result({
        name: "skills: install throughput",
        value: sizeMb / (installMs / 1000),
        unit: "MB/s",
        baseline: "tar -x throughput (higher is better here)",
        baselineValue: sizeMb / (tarMs / 1000),
      }),
      result({
        // Wall time suffers on a loaded machine (Node competes for CPU, tar -x mostly waits on I/O); CPU
        // time (Berth's process plus its tar child) is the load-independent cost.
        name: "skills: install CPU time (Berth + its tar child)",
        value: installCpuMs,
        unit: "ms",
        baseline: "CPU time of tar -x on the same archive",
        baselineValue: tarCpuMs,
      }),
      result({
        name: "skills: install peak RSS growth",
        value: peakGrowthMb,
        unit: "MB",
        baseline: "memory budget",
        baselineValue: MEMORY_BUDGET_MB,
        goal: "< 1×",
      }),
    ];
  } finally {
    await fs.rm(root, { recursive: true, force: true });
  }
}

/** `big-skill/` with SKILL.md and 2 MB files of random bytes, tarred by the system tar. */
async function buildArchive(root: string): Promise<string> {
  const source = path.join(root, "source", "big-skill");
  await fs.mkdir(path.join(source, "data"), { recursive: true });
  await fs.writeFile(
    path.join(source, "SKILL.md"),
    "---\nname: big-skill\ndescription: A large skill for the install benchmark\n---\n# Big\n",
  );
  for (let i = 0; i < ARCHIVE_MB / FILE_MB; i++) {
    await fs.writeFile(path.join(source, "data", `blob-${i}.bin`), randomBytes(FILE_MB * MB));
  }
  const archive = path.join(root, "big-skill.tar");
  await spawnOk("tar", ["-c", "-f", archive, "-C", path.dirname(source), "big-skill"]);
  await fs.rm(path.dirname(source), { recursive: true, force: true });
  return archive;
}

/**
 * CPU milliseconds used since the call by this process plus its reaped children (Linux /proc: `cutime` and
 * `cstime`, in clock ticks of 10 ms), so a spawned tar counts too.
 */
function cpuMeter(): () => number {
  const own = process.cpuUsage();
  const children = childCpuMs();
  return () => {
    const used = process.cpuUsage(own);
    return (used.user + used.system) / 1000 + (childCpuMs() - children);
  };
}

function childCpuMs(): number {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // After the command name: field 14/15 of the man page are cutime/cstime → indexes 13 and 14 here.
    return (Number(fields[13]) + Number(fields[14])) * 10;
  } catch {
    return 0;
  }
}

/** Samples RSS every few ms; `stop` returns the peak growth over the RSS at start, in bytes. */
function rssSampler(): { stop(): number } {
  const startRss = process.memoryUsage.rss();
  let peak = startRss;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 5);
  return {
    stop() {
      clearInterval(timer);
      peak = Math.max(peak, process.memoryUsage.rss());
      return peak - startRss;
    },
  };
}

function spawnOk(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "ignore", "inherit"] });
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`${command} exited with ${code}`)),
    );
  });
}
