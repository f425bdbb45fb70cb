import type { Metadata } from "next";
import { NotBuiltYet } from "@/app/_ui/not-built-yet";

export const metadata: Metadata = { title: "Sessions" };

export default function SessionsPage() {
  return (
    <NotBuiltYet title="Sessions" description="Agent conversations and the workspace each one is bound to." />
  );
}
