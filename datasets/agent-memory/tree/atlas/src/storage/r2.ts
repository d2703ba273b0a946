import type { Env } from "../env";
import { sha256Hex } from "../util/hash";

// Keys are t/<tenant_public_id>/<sha256 of content>. Never tenant names or filenames:
// renames would orphan objects and names are PII. The filename goes in customMetadata.
export function objectKey(tenantPublicId: string, contentSha256: string): string {
  return `t/${tenantPublicId}/${contentSha256}`;
}

const MAGIC: Array<[number[], string]> = [
  [[0x25, 0x50, 0x44, 0x46], "application/pdf"],
  [[0x89, 0x50, 0x4e, 0x47], "image/png"],
  [[0xff, 0xd8, 0xff], "image/jpeg"],
];

// ATL-590: clients often send application/octet-stream; sniff the first 512 bytes.
function sniff(body: ArrayBuffer, declared: string): string {
  if (declared !== "application/octet-stream") return declared;
  const head = new Uint8Array(body.slice(0, 512));
  for (const [sig, type] of MAGIC) if (sig.every((b, i) => head[i] === b)) return type;
  return declared;
}

export async function putBlob(env: Env, tenantPublicId: string, body: ArrayBuffer, filename: string, contentType: string) {
  const key = objectKey(tenantPublicId, await sha256Hex(body));
  await env.BLOBS.put(key, body, {
    httpMetadata: { contentType: sniff(body, contentType) },
    customMetadata: { filename },
  });
  return key;
}
