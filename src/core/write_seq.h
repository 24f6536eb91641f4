#pragma once
// An activity's write sequence: how the service tells a Redis that lost writes it acknowledged
// from one that did not, from the data itself (docs/durability.md, "Lost writes caught from the
// data").
//
// Each activity's Redis state carries it (meta `wepoch`, `wseq`): every script call that records
// an order advances `seq` by one, and the call's order stream entry carries the value. A Redis
// that keeps what it acknowledged only ever holds more; one restored from an older snapshot or
// AOF, a replica promoted before it received the last writes, or an activity wiped, holds less
// than someone saw: the instance that got the replies, or the record, which keeps the highest
// sequence it persisted. The lost-write repair re-bases it to a new epoch (the record's fence it
// advanced, seq 0), so floors kept from before the loss no longer refuse the sale.

#include <compare>
#include <cstdint>

namespace flashsale::core {

struct WriteSeq {
  int64_t epoch = 0;  // the record's fence at the activity's last repair (0: never repaired)
  int64_t seq = 0;    // calls that recorded orders since
  friend auto operator<=>(const WriteSeq&, const WriteSeq&) = default;
  bool zero() const { return epoch == 0 && seq == 0; }
};

}  // namespace flashsale::core
