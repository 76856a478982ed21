"""Reference files for tests/test_records.c, made with the Python standard library only.

make_records.py OUTDIR writes:
  known.tfrecord, known.tfrecord.gz   TFRecord files framed here, with a CRC32C written from the
                                      definition (bit by bit), not from weft's code
  known_tfrecord.txt                  their records, one per line, in hex ('-' for an empty record)
  quotes.csv                          a CSV file with a header, quotes, "" escapes, delimiters and
                                      newlines inside quotes, CRLF and LF, empty lines, empty fields,
                                      spaces around numbers, UTF-8, and no final newline
  quotes_expected.txt                 what Python's csv module reads from it, one row per line: its
                                      line_num and the columns (id i64, name string, price f32, qty i32,
                                      weight f64) with the test's defaults applied to empty fields
"""
import csv
import gzip
import os
import struct
import sys


def crc32c(data, crc=0):
    """CRC32C (Castagnoli): reflected polynomial 0x82F63B78, initial and final inversion."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(records):
    out = b""
    for r in records:
        n = struct.pack("<Q", len(r))
        out += n + struct.pack("<I", masked(crc32c(n))) + r + struct.pack("<I", masked(crc32c(r)))
    return out


RECORDS = [b"", b"a", b"hello, tfrecord", bytes(range(256)) * 5, b"\x00" * 7, b"\n\r\"x\" \xff"]

CSV = (b'id,name,price,qty,weight\r\n'
       b'1,"Smith, John",3.5,10,0.1\r\n'
       b'2,"say ""hi""",-0.25,-7,1e-3\n'
       b'\n'
       b'3,"multi\nline\r\nfield",1e3,2147483647,-2.5E+2\n'
       b'\r\n'
       b'4,,,,\n'
       b'5,plain text, 2.5 , 8 ,  7\n'
       b'6,"",0.1,-2147483648,123456789012\n'
       b'7,caf\xc3\xa9,inf,0,-0.0')

# the defaults test_records.c gives: name "N/A", price -1.5, qty 42, weight 0.5 (id has none)
DEFAULTS = [None, "N/A", "-1.5", "42", "0.5"]


def f32(text):
    # every value in the file is exact in f32 or rounds the same from its double
    return repr(struct.unpack("<f", struct.pack("<f", float(text)))[0])


def main(out):
    assert crc32c(b"123456789") == 0xE3069283, "CRC32C check value"
    data = tfrecord(RECORDS)
    with open(os.path.join(out, "known.tfrecord"), "wb") as f:
        f.write(data)
    with gzip.open(os.path.join(out, "known.tfrecord.gz"), "wb") as f:
        f.write(data)
    with open(os.path.join(out, "known_tfrecord.txt"), "w") as f:
        for r in RECORDS:
            f.write((r.hex() or "-") + "\n")
    with open(os.path.join(out, "quotes.csv"), "wb") as f:
        f.write(CSV)
    with open(os.path.join(out, "quotes.csv"), newline="", encoding="utf-8") as f, \
            open(os.path.join(out, "quotes_expected.txt"), "w") as o:
        rd = csv.reader(f)
        header = None
        for row in rd:
            if not row:
                continue  # an empty line
            if header is None:
                header = row
                continue
            vals = []
            for i, text in enumerate(row):
                d = text == ""
                if d:
                    text = DEFAULTS[i]
                if i == 1:
                    v = text.encode("utf-8").hex() or "-"
                elif i == 2:
                    v = f32(text)
                elif i == 4:
                    v = repr(float(text))
                else:
                    v = str(int(text))
                vals.append(v + ("*" if d else ""))
            o.write("%d\t%s\n" % (rd.line_num, "\t".join(vals)))


if __name__ == "__main__":
    main(sys.argv[1])
