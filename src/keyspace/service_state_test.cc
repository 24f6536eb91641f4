#include "keyspace/service_state.h"

#include <gtest/gtest.h>

#include "keyspace/activity_scripts.h"
#include "redis/cluster.h"

namespace flashsale::keyspace {
namespace {

// The names are a contract with running deployments (a rolling upgrade reads keys the previous
// version wrote): they must not move.
TEST(NamespaceKeysTest, NamesOfTheKeysOutsideActivities) {
  const NamespaceKeys keys("prod");
  EXPECT_EQ(keys.registry_version(), "prod:registry:version");
  EXPECT_EQ(keys.JobLock("reconcile"), "prod:jobs:{reconcile}:lock");
  EXPECT_EQ(keys.JobFence("reconcile"), "prod:jobs:{reconcile}:fence");
  EXPECT_EQ(keys.JobClaim("expire"), "prod:jobs:{expire}:next");
  EXPECT_EQ(keys.JobLock("repair"), "prod:jobs:{repair}:lock");
  EXPECT_EQ(keys.RepairMarker("abc123"), "prod:redis:repaired:{abc123}");
}

TEST(NamespaceKeysTest, AJobsLockAndFenceShareASlot) {
  // DistributedLock's two keys are touched by one script: one Redis Cluster slot.
  const NamespaceKeys keys("ns");
  for (const char* job : {"prewarm", "reconcile", "expire", "repair"}) {
    EXPECT_EQ(redis::KeySlot(keys.JobLock(job)), redis::KeySlot(keys.JobFence(job))) << job;
  }
}

TEST(ActivityKeysTest, ReportAndMissingMarkAreTheActivitysKeys) {
  const ActivityKeys keys("prod", "phone");
  EXPECT_EQ(keys.reconcile_report(), "prod:seckill:{phone}:reconcile");
  EXPECT_EQ(keys.missing_since(), "prod:seckill:{phone}:meta:missing_since");
  EXPECT_EQ(redis::KeySlot(keys.reconcile_report()), redis::KeySlot(keys.meta()));
}

TEST(RepairMarkerTest, FieldsRoundTrip) {
  RepairMarker marker;
  marker.run_id = "r1";
  marker.epoch = 7;
  marker.activities = {"phone", "tv"};
  marker.orders_applied = 3;
  marker.units_applied = 4;
  marker.rebuilt = 1;
  marker.oversold_units = 2;
  marker.flagged_orders = 2;
  marker.acknowledged_lost = 5;
  marker.repaired_ms = 1'700'000'000'000;
  std::map<std::string, std::string, std::less<>> fields;
  for (const auto& [name, value] : RepairMarkerFields(marker)) {
    EXPECT_TRUE(fields.emplace(name, value).second) << "field twice: " << name;
  }
  EXPECT_EQ(fields.at("activities"), "phone tv");
  EXPECT_EQ(fields.at("epoch"), "7");
  const RepairMarker back = ParseRepairMarker(fields);
  EXPECT_EQ(back.run_id, "r1");
  EXPECT_EQ(back.epoch, 7);
  EXPECT_EQ(back.activities, (std::vector<std::string>{"phone", "tv"}));
  EXPECT_EQ(back.orders_applied, 3);
  EXPECT_EQ(back.units_applied, 4);
  EXPECT_EQ(back.rebuilt, 1);
  EXPECT_EQ(back.oversold_units, 2);
  EXPECT_EQ(back.flagged_orders, 2);
  EXPECT_EQ(back.acknowledged_lost, 5);
  EXPECT_EQ(back.repaired_ms, 1'700'000'000'000);
}

TEST(RepairMarkerTest, MissingOrMalformedFieldsReadAsZero) {
  const RepairMarker marker = ParseRepairMarker(
      {{"epoch", "12"}, {"rebuilt", "x1"}, {"orders_applied", "3 "}, {"activities", ""}});
  EXPECT_EQ(marker.epoch, 12);
  EXPECT_EQ(marker.rebuilt, 0);
  EXPECT_EQ(marker.orders_applied, 0);
  EXPECT_TRUE(marker.activities.empty());
  EXPECT_TRUE(marker.run_id.empty());
  EXPECT_EQ(marker.units_applied, 0);
}

}  // namespace
}  // namespace flashsale::keyspace
