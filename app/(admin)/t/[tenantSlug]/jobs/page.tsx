import type { Metadata } from "next";
import { NotBuiltYet } from "@/app/_ui/not-built-yet";

export const metadata: Metadata = { title: "Jobs" };

export default function JobsPage() {
  return (
    <NotBuiltYet title="Jobs" description="Background jobs: provisioning, teardown, sweeps and retries." />
  );
}
