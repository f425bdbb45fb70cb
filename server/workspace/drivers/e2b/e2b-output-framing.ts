/**
 * Byte-exact command output through an SDK that only hands out text.
 *
 * The e2b SDK decodes every stdout/stderr event with a non-fatal `TextDecoder` (CommandHandle in its
 * bundle), so bytes that are not UTF-8 reach the host as U+FFFD and are lost. The SDK stays unmodified:
 * instead, a small Perl relay inside the sandbox runs the command on two pipes and writes each chunk it
 * reads as one ASCII line, `b<base64>\n` (MIME::Base64, in Debian's `perl`) or `h<hex>\n` (plain `perl-base`,
 * Debian-essential). ASCII survives the SDK's decoding unchanged; the host turns the lines back into the
 * exact bytes, still chunk by chunk, so output keeps streaming. A template without Perl falls back to the
 * SDK's text (the old, lossy behaviour), decided once per attached sandbox.
 */
export type OutputFraming = "base64" | "hex" | "text";

/** Prints which relay the sandbox can run (run once per attached sandbox; see parseFramingProbe). */
export const FRAMING_PROBE =
  "if perl -MMIME::Base64 -e 1 2>/dev/null; then echo base64; " +
  "elif perl -e 1 2>/dev/null; then echo hex; else echo text; fi";

export function parseFramingProbe(stdout: string): OutputFraming {
  const answer = stdout.trim();
  return answer === "base64" || answer === "hex" ? answer : "text";
}

/**
 * $ARGV[0] = b or h, then the command's argv. Forks the command with its stdout and stderr on pipes,
 * relays every read as one framed line to the same stream, and exits as sh would: the command's status,
 * 128 + signal when it was killed, 127 / 126 when it cannot be run.
 */
const RELAY = String.raw`
use strict;
my $mode = shift @ARGV;
my $encode = $mode eq "b"
  ? do { require MIME::Base64; sub { MIME::Base64::encode_base64($_[0], "") } }
  : sub { unpack("H*", $_[0]) };
pipe(my $outR, my $outW) or die "pipe: $!";
pipe(my $errR, my $errW) or die "pipe: $!";
my $pid = fork();
die "fork: $!" unless defined $pid;
if ($pid == 0) {
  close $outR; close $errR;
  open(STDOUT, ">&", $outW) or die; open(STDERR, ">&", $errW) or die;
  close $outW; close $errW;
  { no warnings; exec { $ARGV[0] } @ARGV; }
  my $code = $!{ENOENT} ? 127 : 126;
  print STDERR "$ARGV[0]: " . ($code == 127 ? "not found" : "$!") . "\n";
  exit $code;
}
close $outW; close $errW;
my %open = (fileno($outR) => [$outR, *STDOUT], fileno($errR) => [$errR, *STDERR]);
while (%open) {
  my $want = "";
  vec($want, $_, 1) = 1 for keys %open;
  my $ready = select(my $got = $want, undef, undef, undef);
  if ($ready < 0) { next if $!{EINTR}; die "select: $!"; }
  for my $fd (keys %open) {
    next unless vec($got, $fd, 1);
    my ($reader, $writer) = @{$open{$fd}};
    my $n = sysread($reader, my $chunk, 65536);
    if (!defined $n) { next if $!{EINTR} || $!{EAGAIN}; }
    if (!$n) { delete $open{$fd}; next; }
    my $line = $mode . $encode->($chunk) . "\n";
    while (length $line) {
      my $written = syswrite($writer, $line);
      if (!defined $written) { next if $!{EINTR}; exit 141; }
      substr($line, 0, $written) = "";
    }
  }
}
waitpid($pid, 0);
exit(($? & 127) ? 128 + ($? & 127) : $? >> 8);
`;

/** The argv that runs `argv` under the relay (the caller shell-quotes it like any other). */
export function framedArgv(framing: OutputFraming, argv: readonly string[]): readonly string[] {
  if (framing === "text") return argv;
  return ["perl", "-e", RELAY, framing === "base64" ? "b" : "h", ...argv];
}

/**
 * Turns one stream's text events back into bytes. Framed: complete lines are decoded (a line cut by an
 * envd event boundary waits for its rest); a line that is not a frame (the relay itself failing) is kept as
 * text. Text: the SDK's string, re-encoded as UTF-8.
 */
export function outputDecoder(
  framing: OutputFraming,
  emit: (chunk: Buffer) => void,
): { push(text: string): void; end(): void } {
  if (framing === "text") {
    return { push: (text) => emit(Buffer.from(text, "utf8")), end: () => undefined };
  }
  let pending = "";
  const decodeLine = (line: string) => {
    if (line.length === 0) return;
    const tag = line[0];
    const body = line.slice(1);
    if (tag === "b" && /^[A-Za-z0-9+/]*={0,2}$/.test(body)) emit(Buffer.from(body, "base64"));
    else if (tag === "h" && /^(?:[0-9a-f]{2})*$/.test(body)) emit(Buffer.from(body, "hex"));
    else emit(Buffer.from(`${line}\n`, "utf8"));
  };
  return {
    push(text) {
      pending += text;
      let newline = pending.indexOf("\n");
      while (newline !== -1) {
        decodeLine(pending.slice(0, newline));
        pending = pending.slice(newline + 1);
        newline = pending.indexOf("\n");
      }
    },
    end() {
      // Only a relay killed mid-line leaves a remainder; keep what of it decodes.
      if (pending.length === 0) return;
      const rest = pending;
      pending = "";
      const tag = rest[0];
      if (tag === "b") emit(Buffer.from(rest.slice(1, 1 + Math.floor((rest.length - 1) / 4) * 4), "base64"));
      else if (tag === "h")
        emit(Buffer.from(rest.slice(1, 1 + Math.floor((rest.length - 1) / 2) * 2), "hex"));
      else emit(Buffer.from(rest, "utf8"));
    },
  };
}
