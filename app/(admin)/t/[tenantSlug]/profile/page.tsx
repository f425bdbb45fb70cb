import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { ProfileView } from "./profile-view";

export const metadata: Metadata = { title: "Profile" };

export default function ProfilePage() {
  return (
    <>
      <PageHeader title="Profile" description="Your account and password." />
      <ProfileView />
    </>
  );
}
