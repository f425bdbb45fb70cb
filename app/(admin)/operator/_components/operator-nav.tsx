"use client";

import { Building2, ScrollText, ShieldCheck } from "lucide-react";
import Link from "next/link";
import { usePathname } from "next/navigation";
import { cn } from "@/app/_components/ui/cn";

const SECTIONS = [
  { href: "/operator", label: "Tenants", icon: Building2 },
  { href: "/operator/operators", label: "Operators", icon: ShieldCheck },
  { href: "/operator/audit", label: "Operator audit", icon: ScrollText },
] as const;

export function OperatorNav() {
  const pathname = usePathname();
  return (
    <nav className="flex flex-col gap-0.5" aria-label="Operator">
      {SECTIONS.map(({ href, label, icon: Icon }) => {
        const isCurrent =
          href === "/operator"
            ? pathname === href || pathname.startsWith("/operator/tenants")
            : pathname.startsWith(href);
        return (
          <Link
            key={href}
            href={href}
            aria-current={isCurrent ? "page" : undefined}
            className={cn(
              "text-muted-foreground hover:bg-accent hover:text-foreground flex h-8 items-center gap-2.5 rounded-md px-2.5 text-sm font-medium transition-colors",
              isCurrent && "bg-accent text-foreground",
            )}
          >
            <Icon className="size-4" aria-hidden />
            {label}
          </Link>
        );
      })}
    </nav>
  );
}
