/** A small valid PNG standing in for an image in profile mode: one colour per model. */
import { deflateSync } from "node:zlib";
import { fnv1a } from "../profile/stats.ts";

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Uint8Array): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, "ascii");
  out.set(data, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** Encodes 8-bit RGB pixels (row-major, width*height*3 bytes) as PNG. */
export function encodeRgbPng(width: number, height: number, rgb: Uint8Array): Uint8Array {
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    raw[y * (width * 3 + 1)] = 0;
    raw.set(rgb.subarray(y * width * 3, (y + 1) * width * 3), y * (width * 3 + 1) + 1);
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type RGB
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, chunk("IHDR", ihdr), chunk("IDAT", deflateSync(raw)), chunk("IEND", new Uint8Array(0))]);
}

/** Side of the placeholder image, in pixels. */
export const PLACEHOLDER_SIDE = 16;
const cache = new Map<string, Uint8Array>();

/** The placeholder PNG of a model (cached). */
export function placeholderPng(model: string): Uint8Array {
  let png = cache.get(model);
  if (!png) {
    const h = fnv1a(model);
    const rgb = new Uint8Array(PLACEHOLDER_SIDE * PLACEHOLDER_SIDE * 3);
    for (let i = 0; i < rgb.length; i += 3) {
      rgb[i] = h & 0xff;
      rgb[i + 1] = (h >>> 8) & 0xff;
      rgb[i + 2] = (h >>> 16) & 0xff;
    }
    png = encodeRgbPng(PLACEHOLDER_SIDE, PLACEHOLDER_SIDE, rgb);
    cache.set(model, png);
  }
  return png;
}
